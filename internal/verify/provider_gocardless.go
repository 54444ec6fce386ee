package verify

func init() {
	register(&Provider{
		Name:             "gocardless",
		Title:            "GoCardless",
		Family:           FamilyHMAC,
		Signature:        "Webhook-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks",
		Notes:            "GoCardless signs no time; a webhook batches events: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"Webhook-Signature"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event: oneOf(fromFunc("body events[0].resource_type.action", func(c *call) string {
			return joinEvent(jsonField(c.json(), "events", "0", "resource_type"), jsonField(c.json(), "events", "0", "action"))
		})),
		Template:  "GoCardless {{event}}: {{payload.events.0.details.description}}",
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build:     bodyMAC(algSHA256, "Webhook-Signature", "", encHex),
	})
}
