package verify

const paystackBody = `{"event":"charge.success","data":{"reference":"ref_1","amount":10000,"currency":"NGN"}}`

var _ = providerTest("paystack", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://paystack.com/docs/payments/webhooks/#verify-event-origin: x-paystack-signature: <hex HMAC-SHA512(body)> under the secret key, with a fixed secret",
		cfg:    Config{Scheme: "paystack", Secrets: []string{genericSecret}},
		req:    post(paystackBody, "X-Paystack-Signature", ""+hexMAC(sha512H, genericSecret, paystackBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha512H, genericSecret, paystackBody)), Event: "charge.success"},
	}},
})
