package verify

func init() {
	register(&Provider{
		Name:             "datadog",
		Title:            "Datadog",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token> (or a custom header: header)",
		Doc:              "https://docs.datadoghq.com/integrations/webhooks/",
		Notes:            "Datadog webhooks are unsigned: configure a custom header (Authorization: Bearer <token> by default, or name it with header) or basic auth. The payload is your webhook's template; the default one is read here.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("event_type")),
		Template:         "Datadog {{event}}: {{payload.title}} {{payload.body}}",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build:            tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
