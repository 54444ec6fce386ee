package verify

const razorpayBody = `{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1","amount":50000,"currency":"INR"}}}}`

var _ = providerTest("razorpay", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://razorpay.com/docs/webhooks/validate-test/: X-Razorpay-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "razorpay", Secrets: []string{genericSecret}},
		req:    post(razorpayBody, "X-Razorpay-Signature", ""+hexMAC(sha256H, genericSecret, razorpayBody), "X-Razorpay-Event-Id", "FlHdMLUhJ1T1xg"),
		now:    testNow,
		want:   Result{DeliveryID: "FlHdMLUhJ1T1xg", Event: "payment.captured"},
	}},
})
