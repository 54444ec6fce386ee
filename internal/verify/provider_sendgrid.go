package verify

func init() {
	register(&Provider{
		Name:             "sendgrid",
		Title:            "SendGrid Event Webhook",
		Family:           FamilyECDSA,
		Signature:        "X-Twilio-Email-Event-Webhook-Signature: <base64 DER ECDSA P-256 SHA-256(timestamp + body)>, X-Twilio-Email-Event-Webhook-Timestamp",
		Doc:              "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features",
		Notes:            "public_key is the Signed Event Webhook's verification key (base64 DER). SendGrid posts an array of events: templates see it as payload.events. It sends no delivery id: the body's digest deduplicates redeliveries.",
		ArrayMember:      "events",
		SignatureHeaders: []string{"X-Twilio-Email-Event-Webhook-Signature"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("events.0.event"), fromJSON("event")),
		Template:         "SendGrid {{event}}: {{payload.events.0.email}} {{payload.events.0.reason}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"public_key"},
		Required:         []string{"public_key"},
		SignsBody:        true,
		build: ecdsaProvider(pubSpec{
			sigHeader: "X-Twilio-Email-Event-Webhook-Signature", tsHeader: "X-Twilio-Email-Event-Webhook-Timestamp", enc: encBase64,
		}),
	})
}
