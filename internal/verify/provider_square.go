package verify

func init() {
	register(&Provider{
		Name:             "square",
		Title:            "Square",
		Family:           FamilyHMAC,
		Signature:        "x-square-hmacsha256-signature: <base64 HMAC-SHA256(notification URL + body)>",
		Doc:              "https://developer.squareup.com/docs/webhooks/step3validate",
		Notes:            "Square signs the notification URL as registered: behind a proxy that is not trusted, or with a rewritten path, set public_url. Square signs no time.",
		SignatureHeaders: []string{"X-Square-Hmacsha256-Signature", "X-Square-Signature"},
		DeliveryID:       oneOf(fromJSON("event_id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Square {{event}}: {{payload.data.type}} {{payload.data.id}}",
		Words:            []string{"secret", "public_url"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-Square-Hmacsha256-Signature"}, enc: encBase64,
			parts: []part{urlPart(nil), bodyPart()},
		}),
	})
}
