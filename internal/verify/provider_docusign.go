package verify

func init() {
	register(&Provider{
		Name:             "docusign",
		Title:            "DocuSign",
		Family:           FamilyHMAC,
		Signature:        "X-DocuSign-Signature-1…5: <base64 HMAC-SHA256(body)>, one per Connect key",
		Doc:              "https://developers.docusign.com/platform/webhooks/connect/hmac/",
		Notes:            "Connect HMAC (JSON SIM messages). DocuSign sends one header per active key; any may match. It signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Docusign-Signature-1", "X-Docusign-Signature-2", "X-Docusign-Signature-3", "X-Docusign-Signature-4", "X-Docusign-Signature-5"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromJSON("event")),
		Template:         "DocuSign {{event}}: envelope {{payload.data.envelopeId}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-Docusign-Signature-1", "X-Docusign-Signature-2", "X-Docusign-Signature-3", "X-Docusign-Signature-4", "X-Docusign-Signature-5"},
			enc:     encBase64,
			parts:   []part{bodyPart()},
		}),
	})
}
