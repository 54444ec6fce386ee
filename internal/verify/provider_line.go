package verify

func init() {
	register(&Provider{
		Name:             "line",
		Title:            "LINE",
		Family:           FamilyHMAC,
		Signature:        "x-line-signature: <base64 HMAC-SHA256(body)> under the channel secret",
		Doc:              "https://developers.line.biz/en/reference/messaging-api/#signature-validation",
		Notes:            "LINE signs no time; webhookEventId is the same on redelivery.",
		SignatureHeaders: []string{"X-Line-Signature"},
		DeliveryID:       oneOf(fromJSON("events.0.webhookEventId")),
		Event:            oneOf(fromJSON("events.0.type")),
		Template:         "LINE {{event}} from {{payload.events.0.source.userId}}: {{payload.events.0.message.text}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Line-Signature", "", encBase64),
	})
}
