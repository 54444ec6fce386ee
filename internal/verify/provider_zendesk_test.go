package verify

import "time"

const zendeskBody = `{"type":"zen:event-type:ticket.created","id":"cbe4028c-7239-495d-b020-f22348516046","detail":{"subject":"Printer on fire","status":"NEW"}}`

var zendeskTS = testNow.UTC().Format(time.RFC3339)

var _ = providerTest("zendesk", providerTests{
	vectors: []vector{{
		name:   "ticket.created",
		source: "computed from https://developer.zendesk.com/documentation/webhooks/verifying/: base64 HMAC-SHA256 of the timestamp header followed by the body",
		cfg:    Config{Scheme: "zendesk", Secrets: []string{genericSecret}},
		req: post(zendeskBody, "X-Zendesk-Webhook-Signature-Timestamp", zendeskTS,
			"X-Zendesk-Webhook-Signature", b64MAC(sha256H, genericSecret, zendeskTS, zendeskBody),
			"X-Zendesk-Webhook-Invocation-Id", "8350205582"),
		now:  testNow,
		want: Result{DeliveryID: "8350205582", Event: "zen:event-type:ticket.created"},
	}},
})
