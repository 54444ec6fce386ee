package verify

func init() {
	register(&Provider{
		Name:             "openai",
		Title:            "OpenAI",
		Family:           FamilyStandard,
		Signature:        "webhook-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)> (Standard Webhooks)",
		Doc:              "https://platform.openai.com/docs/guides/webhooks#verifying-webhook-signatures",
		Notes:            "OpenAI follows Standard Webhooks: webhook-* headers, whsec_ signing secret. The signed webhook-id is the delivery id.",
		SignatureHeaders: standardHeadersList,
		DeliveryID:       oneOf(standardID),
		Event:            oneOf(fromJSON("type")),
		Template:         "OpenAI {{event}}: {{payload.data.id}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            standardProvider,
	})
}
