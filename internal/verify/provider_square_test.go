package verify

const squareBody = `{"merchant_id":"6SSW7HV8K2ST5","type":"payment.created","event_id":"13b867cf-db3d-4b1c-90b6-2f32a9d78124","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY"}}`

var _ = providerTest("square", providerTests{
	vectors: []vector{{
		name:   "payment.created",
		source: "computed from https://developer.squareup.com/docs/webhooks/step3validate: base64 HMAC-SHA256 of the notification URL followed by the body",
		cfg:    Config{Scheme: "square", Secrets: []string{genericSecret}},
		req:    post(squareBody, "X-Square-Hmacsha256-Signature", b64MAC(sha256H, genericSecret, hookURL, squareBody)),
		now:    testNow,
		want:   Result{DeliveryID: "13b867cf-db3d-4b1c-90b6-2f32a9d78124", Event: "payment.created"},
	}, {
		name:   "behind a proxy, with public_url",
		source: "computed from https://developer.squareup.com/docs/webhooks/step3validate: the URL Square called, given as public_url",
		cfg:    Config{Scheme: "square", Secrets: []string{genericSecret}, PublicURL: "https://shop.example.com/edge/"},
		req: req("POST", "http://10.0.0.7:8080/hooks/p", squareBody,
			"X-Square-Hmacsha256-Signature", b64MAC(sha256H, genericSecret, "https://shop.example.com/edge/hooks/p", squareBody)),
		now:  testNow,
		want: Result{DeliveryID: "13b867cf-db3d-4b1c-90b6-2f32a9d78124", Event: "payment.created"},
	}},
	tamper: func(r *Request) { r.URL.Path = "/hooks/other" },
})
