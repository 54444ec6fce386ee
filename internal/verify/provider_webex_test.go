package verify

const webexBody = `{"id":"Y2lzY29","resource":"messages","event":"created","data":{"personEmail":"ann@example.com","roomId":"R1"}}`

var _ = providerTest("webex", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developer.webex.com/docs/webhooks#handling-requests-from-webex: X-Spark-Signature: <hex HMAC-SHA1(body)>, with a fixed secret",
		cfg:    Config{Scheme: "webex", Secrets: []string{genericSecret}},
		req:    post(webexBody, "X-Spark-Signature", ""+hexMAC(sha1H, genericSecret, webexBody)),
		now:    testNow,
		want:   Result{DeliveryID: "Y2lzY29", Event: "messages.created"},
	}},
})
