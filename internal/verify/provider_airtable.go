package verify

func init() {
	register(&Provider{
		Name:             "airtable",
		Title:            "Airtable",
		Family:           FamilyHMAC,
		Signature:        "X-Airtable-Content-MAC: hmac-sha256=<hex HMAC-SHA256(body)> under the base64-decoded macSecretBase64",
		Doc:              "https://airtable.com/developers/web/api/webhooks-overview#webhook-notification-delivery",
		Notes:            "The secret is the webhook's macSecretBase64, as returned when it was created. A notification only says new payloads are ready (list them with the API). Airtable signs no time.",
		SignatureHeaders: []string{"X-Airtable-Content-Mac"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromFunc(`"notification"`, func(*call) string { return "notification" })),
		Template:         "Airtable {{event}}: base {{payload.base.id}}, webhook {{payload.webhook.id}} has new payloads",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			key: keyBase64, headers: []string{"X-Airtable-Content-Mac"}, prefix: "hmac-sha256=", enc: encHex,
			parts: []part{bodyPart()},
		}),
	})
}
