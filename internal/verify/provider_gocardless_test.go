package verify

const gocardlessBody = `{"events":[{"id":"EV123","resource_type":"payments","action":"confirmed","details":{"description":"Payment confirmed"}}]}`

var _ = providerTest("gocardless", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks: Webhook-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "gocardless", Secrets: []string{genericSecret}},
		req:    post(gocardlessBody, "Webhook-Signature", ""+hexMAC(sha256H, genericSecret, gocardlessBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha256H, genericSecret, gocardlessBody)), Event: "payments.confirmed"},
	}},
})
