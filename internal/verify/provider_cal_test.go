package verify

const calBody = `{"triggerEvent":"BOOKING_CREATED","payload":{"title":"Intro call","attendees":[{"name":"Ann"}]}}`

var _ = providerTest("cal", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://cal.com/docs/developing/guides/automation/webhooks#verifying-the-authenticity-of-the-received-payload: X-Cal-Signature-256: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "cal", Secrets: []string{genericSecret}},
		req:    post(calBody, "X-Cal-Signature-256", ""+hexMAC(sha256H, genericSecret, calBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha256H, genericSecret, calBody)), Event: "BOOKING_CREATED"},
	}},
})
