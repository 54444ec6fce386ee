package verify

func init() {
	register(&Provider{
		Name:             "cal",
		Title:            "Cal.com",
		Family:           FamilyHMAC,
		Signature:        "X-Cal-Signature-256: <hex HMAC-SHA256(body)>",
		Doc:              "https://cal.com/docs/developing/guides/automation/webhooks#verifying-the-authenticity-of-the-received-payload",
		Notes:            "Cal.com signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Cal-Signature-256"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromJSON("triggerEvent")),
		Template:         "Cal.com {{event}}: {{payload.payload.title}} with {{payload.payload.attendees.0.name}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Cal-Signature-256", "", encHex),
	})
}
