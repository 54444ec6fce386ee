package verify

const lemonsqueezyBody = `{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"1","attributes":{"status":"paid"}}}`

var _ = providerTest("lemonsqueezy", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://docs.lemonsqueezy.com/help/webhooks/signing-requests: X-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "lemonsqueezy", Secrets: []string{genericSecret}},
		req:    post(lemonsqueezyBody, "X-Signature", ""+hexMAC(sha256H, genericSecret, lemonsqueezyBody), "X-Event-Name", "order_created"),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha256H, genericSecret, lemonsqueezyBody)), Event: "order_created"},
	}},
})
