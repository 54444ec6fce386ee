package verify

func init() {
	register(&Provider{
		Name:             "helpscout",
		Title:            "Help Scout",
		Family:           FamilyHMAC,
		Signature:        "X-HelpScout-Signature: <base64 HMAC-SHA1(body)>",
		Doc:              "https://developer.helpscout.com/webhooks/",
		Notes:            "Help Scout signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-HelpScout-Signature"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromHeader("X-HelpScout-Event")),
		Template:         "Help Scout {{event}}: {{payload.subject}} from {{payload.customer.email}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA1, "X-HelpScout-Signature", "", encBase64),
	})
}
