package verify

func init() {
	register(&Provider{
		Name:             "homeassistant",
		Title:            "Home Assistant",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token> (or a custom header: header)",
		Doc:              "https://www.home-assistant.io/integrations/rest_command/",
		Notes:            "Home Assistant's rest_command (or an automation's webhook notify) sends the headers you configure: Authorization: Bearer <token> by default. The payload is yours: the default template reads message and event.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("event")),
		Template:         "Home Assistant {{event}}: {{payload.message}}",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build:            tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
