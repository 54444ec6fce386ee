package verify

const postmarkBody = `{"RecordType":"Delivery","MessageID":"00000000-0000-0000-0000-000000000000","Recipient":"john@example.com","Subject":"Welcome"}`

var _ = providerTest("postmark", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://postmarkapp.com/developer/webhooks/webhooks-overview#protecting-your-webhook: basic auth credentials from the webhook URL",
		cfg:    Config{Scheme: "postmark", Secrets: []string{"postmark:hook-password-123"}},
		req:    post(postmarkBody, "Authorization", basicAuth("postmark", "hook-password-123")),
		now:    testNow,
		want:   Result{DeliveryID: "Delivery.00000000-0000-0000-0000-000000000000", Event: "Delivery"},
	}},
	notes: "a token does not cover the body",
})
