package verify

const (
	zoomSecret     = "zoom-secret-token-abcdef0123456789"
	zoomBody       = `{"event":"meeting.started","event_ts":1700000000000,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","topic":"Weekly sync"}}}`
	zoomValidation = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
)

// zoomSigned is a POST signed the Zoom way.
func zoomSigned(secret, body string) func() *Request {
	return post(body, "x-zm-request-timestamp", ts(0), "x-zm-signature", "v0="+hexMAC(sha256H, secret, "v0:", ts(0), ":", body))
}

var _ = providerTest("zoom", providerTests{
	vectors: []vector{{
		name:   "meeting.started",
		source: "computed from https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events: v0= hex HMAC-SHA256 of v0:timestamp:body under the secret token",
		cfg:    Config{Scheme: "zoom", Secrets: []string{zoomSecret}},
		req:    zoomSigned(zoomSecret, zoomBody),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(zoomBody), Event: "meeting.started"},
	}},
	handshakes: []handshakeCase{{
		name:   "url_validation",
		source: "computed from https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint: encryptedToken is hex HMAC-SHA256 of plainToken under the secret token",
		req:    zoomSigned(zoomSecret, zoomValidation),
		status: 200, ctype: "application/json",
		body: `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + hexMAC(sha256H, zoomSecret, "qgg8vlvZRS6UYooatFL8Aw") + `"}`,
	}, {
		name:     "url_validation signed with another secret",
		req:      zoomSigned(otherSecret, zoomValidation),
		wantFail: ReasonBadSignature,
	}},
})
