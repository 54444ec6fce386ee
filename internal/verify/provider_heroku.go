package verify

func init() {
	register(&Provider{
		Name:             "heroku",
		Title:            "Heroku",
		Family:           FamilyHMAC,
		Signature:        "Heroku-Webhook-Hmac-SHA256: <base64 HMAC-SHA256(body)>",
		Doc:              "https://devcenter.heroku.com/articles/app-webhooks#securing-webhook-requests",
		Notes:            "Heroku signs no time; Heroku-Webhook-Id deduplicates redeliveries.",
		SignatureHeaders: []string{"Heroku-Webhook-Hmac-SHA256"},
		DeliveryID:       oneOf(fromHeader("Heroku-Webhook-Id")),
		Event:            oneOf(fromFunc("body resource.action", func(c *call) string { return joinEvent(jsonField(c.json(), "resource"), jsonField(c.json(), "action")) })),
		Template:         "Heroku {{event}}: {{payload.data.app.name}} {{payload.data.description}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "Heroku-Webhook-Hmac-SHA256", "", encBase64),
	})
}
