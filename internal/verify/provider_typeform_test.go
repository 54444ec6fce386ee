package verify

const typeformBody = `{"event_id":"01H0","event_type":"form_response","form_response":{"form_id":"lT4Z3j","definition":{"title":"Feedback"},"answers":[]}}`

var _ = providerTest("typeform", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://www.typeform.com/developers/webhooks/secure-your-webhooks/: Typeform-Signature: sha256=<base64 HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "typeform", Secrets: []string{genericSecret}},
		req:    post(typeformBody, "Typeform-Signature", "sha256="+b64MAC(sha256H, genericSecret, typeformBody)),
		now:    testNow,
		want:   Result{DeliveryID: "01H0", Event: "form_response"},
	}},
})
