package verify

var _ = providerTest("hmac", providerTests{
	vectors: []vector{{
		name:   "timestamped layout",
		source: "computed from https://www.rfc-editor.org/rfc/rfc2104: the configured layout {timestamp}.{id}.{body}, HMAC-SHA512, base64, prefix sha512=",
		cfg: Config{Scheme: "hmac", Secrets: []string{genericSecret}, Header: "X-Signature", Prefix: "sha512=",
			Algorithm: "sha512", Encoding: "base64", TimestampHeader: "X-Timestamp", Layout: "{timestamp}.{id}.{body}", IDHeader: "X-Delivery"},
		req: func() *Request {
			body := `{"event":"build.finished","build":{"id":42}}`
			sig := b64(mac(testHashes["sha512"], []byte(genericSecret), ts(0), ".", "d-42", ".", body))
			return post(body, "X-Signature", "sha512="+sig, "X-Timestamp", ts(0), "X-Delivery", "d-42")()
		},
		now:  testNow,
		want: Result{DeliveryID: "d-42", Event: "build.finished"},
	}},
	strip: func(r *Request) { r.Header.Del("X-Signature") },
})
