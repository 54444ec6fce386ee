package verify

const gogsBody = `{"ref":"refs/heads/master","repository":{"full_name":"unknwon/webhooks"},"sender":{"username":"unknwon"}}`

var _ = providerTest("gogs", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://gogs.io/docs/features/webhook: X-Gogs-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "gogs", Secrets: []string{genericSecret}},
		req:    post(gogsBody, "X-Gogs-Signature", ""+hexMAC(sha256H, genericSecret, gogsBody), "X-Gogs-Delivery", "f6266f16", "X-Gogs-Event", "push"),
		now:    testNow,
		want:   Result{DeliveryID: "f6266f16", Event: "push"},
	}},
})
