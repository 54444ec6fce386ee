package verify

func init() {
	register(&Provider{
		Name:             "typeform",
		Title:            "Typeform",
		Family:           FamilyHMAC,
		Signature:        "Typeform-Signature: sha256=<base64 HMAC-SHA256(body)>",
		Doc:              "https://www.typeform.com/developers/webhooks/secure-your-webhooks/",
		Notes:            "Typeform signs no time.",
		SignatureHeaders: []string{"Typeform-Signature"},
		DeliveryID:       oneOf(fromJSON("event_id")),
		Event:            oneOf(fromJSON("event_type")),
		Template:         "Typeform {{event}}: {{payload.form_response.definition.title}} answered",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "Typeform-Signature", "sha256=", encBase64),
	})
}
