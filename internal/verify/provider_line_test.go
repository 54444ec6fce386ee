package verify

const lineBody = `{"destination":"U1","events":[{"type":"message","webhookEventId":"01FZ74A0TDDPYRVKNK77XKC3ZR","message":{"type":"text","text":"Hello"},"source":{"type":"user","userId":"U4af"}}]}`

var _ = providerTest("line", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developers.line.biz/en/reference/messaging-api/#signature-validation: x-line-signature: <base64 HMAC-SHA256(body)> under the channel secret, with a fixed secret",
		cfg:    Config{Scheme: "line", Secrets: []string{genericSecret}},
		req:    post(lineBody, "X-Line-Signature", ""+b64MAC(sha256H, genericSecret, lineBody)),
		now:    testNow,
		want:   Result{DeliveryID: "01FZ74A0TDDPYRVKNK77XKC3ZR", Event: "message"},
	}},
})
