package verify

const (
	xSecret = "x-consumer-secret-0123456789abcdef"
	xBody   = `{"for_user_id":"2244994945","tweet_create_events":[{"id_str":"1","text":"@agent what's new?"}]}`
)

var _ = providerTest("x", providerTests{
	vectors: []vector{{
		name:   "tweet_create_events",
		source: "computed from https://docs.x.com/x-api/webhooks/introduction: sha256= base64 HMAC-SHA256 of the body under the consumer secret",
		cfg:    Config{Scheme: "x", Secrets: []string{xSecret}},
		req:    post(xBody, "X-Twitter-Webhooks-Signature", "sha256="+b64MAC(sha256H, xSecret, xBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex("sha256=" + b64MAC(sha256H, xSecret, xBody)), Event: "tweet_create_events"},
	}},
	handshakes: []handshakeCase{{
		name:   "CRC",
		source: "computed from https://docs.x.com/x-api/webhooks/introduction: response_token is sha256= base64 HMAC-SHA256 of crc_token under the consumer secret",
		req:    req("GET", hookURL+"?crc_token=FaYGXrtFq6kn0ZSH8rzGSxoq&nonce=MTYzNzE", ""),
		status: 200, ctype: "application/json",
		body: `{"response_token":"sha256=` + b64MAC(sha256H, xSecret, "FaYGXrtFq6kn0ZSH8rzGSxoq") + `"}`,
	}, {
		name:     "a crc_token shaped like a body",
		req:      req("GET", hookURL+"?crc_token=%7B%7D", ""),
		wantFail: ReasonBadHandshake,
	}},
})
