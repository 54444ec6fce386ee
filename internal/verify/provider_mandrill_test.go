package verify

import "net/url"

const mandrillEvents = `[{"event":"open","ts":1365109999,"msg":{"subject":"Welcome","email":"ann@example.com"}}]`

var mandrillBody = "mandrill_events=" + url.QueryEscape(mandrillEvents)

var _ = providerTest("mandrill", providerTests{
	vectors: []vector{{
		name:   "open event",
		source: "computed from https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests: base64 HMAC-SHA1 of the URL followed by each POST field name and value, sorted",
		cfg:    Config{Scheme: "mandrill", Secrets: []string{genericSecret}},
		req: post(mandrillBody, "Content-Type", formCT,
			"X-Mandrill-Signature", b64MAC(sha1H, genericSecret, hookURL, "mandrill_events", mandrillEvents)),
		now: testNow,
		want: Result{DeliveryID: sha256Hex(b64MAC(sha1H, genericSecret, hookURL, "mandrill_events", mandrillEvents)), Event: "open",
			Payload: []byte(`{"mandrill_events":` + mandrillEvents + `}`)},
	}},
	handshakes: []handshakeCase{{
		name:   "HEAD on creation",
		source: "computed from https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/: a HEAD request checks the URL",
		req:    req("HEAD", hookURL, ""),
		status: 200,
	}},
})
