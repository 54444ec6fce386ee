package verify

const coinbaseBody = `{"id":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","type":"charge:confirmed","data":{"code":"66BEOV2A"}}}`

var _ = providerTest("coinbase", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://docs.cdp.coinbase.com/commerce/docs/webhooks-security: X-CC-Webhook-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "coinbase", Secrets: []string{genericSecret}},
		req:    post(coinbaseBody, "X-CC-Webhook-Signature", ""+hexMAC(sha256H, genericSecret, coinbaseBody)),
		now:    testNow,
		want:   Result{DeliveryID: "24934862-d980-46cb-9402-43c81b0cdba6", Event: "charge:confirmed"},
	}},
})
