package verify

const helpscoutBody = `{"id":1,"subject":"Refund please","customer":{"email":"ann@example.com"}}`

var _ = providerTest("helpscout", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developer.helpscout.com/webhooks/: X-HelpScout-Signature: <base64 HMAC-SHA1(body)>, with a fixed secret",
		cfg:    Config{Scheme: "helpscout", Secrets: []string{genericSecret}},
		req:    post(helpscoutBody, "X-HelpScout-Signature", ""+b64MAC(sha1H, genericSecret, helpscoutBody), "X-HelpScout-Event", "convo.created"),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(b64MAC(sha1H, genericSecret, helpscoutBody)), Event: "convo.created"},
	}},
})
