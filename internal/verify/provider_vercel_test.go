package verify

const vercelBody = `{"id":"evt_1","type":"deployment.succeeded","createdAt":1700000000000,"payload":{"deployment":{"url":"app-abc.vercel.app"},"name":"app"}}`

var _ = providerTest("vercel", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks: x-vercel-signature: <hex HMAC-SHA1(body)>, with a fixed secret",
		cfg:    Config{Scheme: "vercel", Secrets: []string{genericSecret}},
		req:    post(vercelBody, "X-Vercel-Signature", ""+hexMAC(sha1H, genericSecret, vercelBody)),
		now:    testNow,
		want:   Result{DeliveryID: "evt_1", Event: "deployment.succeeded"},
	}},
})
