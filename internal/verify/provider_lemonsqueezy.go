package verify

func init() {
	register(&Provider{
		Name:             "lemonsqueezy",
		Title:            "Lemon Squeezy",
		Family:           FamilyHMAC,
		Signature:        "X-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://docs.lemonsqueezy.com/help/webhooks/signing-requests",
		Notes:            "Lemon Squeezy signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Signature"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromHeader("X-Event-Name"), fromJSON("meta.event_name")),
		Template:         "Lemon Squeezy {{event}}: {{payload.data.type}} {{payload.data.id}} {{payload.data.attributes.status}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Signature", "", encHex),
	})
}
