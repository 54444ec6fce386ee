package verify

func init() {
	register(&Provider{
		Name:             "eventgrid",
		Title:            "Azure Event Grid",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token> set as a delivery property (or the header named by header)",
		Doc:              "https://learn.microsoft.com/en-us/azure/event-grid/delivery-properties",
		Notes:            "Event Grid schema (an array of events, seen as payload.events). Add a static Authorization delivery property (secret) on the subscription; it is sent with the validation event too. The CloudEvents schema's OPTIONS handshake is not supported. The body is not signed.",
		ArrayMember:      "events",
		SignatureHeaders: []string{"Authorization"},
		Handshake:        "SubscriptionValidationEvent (with the token) → {\"validationResponse\": validationCode}",
		DeliveryID:       oneOf(fromJSON("events.0.id")),
		Event:            oneOf(fromJSON("events.0.eventType")),
		Template:         "Event Grid {{event}}: {{payload.events.0.subject}}",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build: withHandshake(tokenProvider(tokenSpec{header: "Authorization"}), handshakeSpec{
			detect: jsonIs("Microsoft.EventGrid.SubscriptionValidationEvent", "events", "0", "eventType"),
			auth:   hsSigned,
			answer: echoJSON("event grid subscription validation", "validationResponse", "events", "0", "data", "validationCode"),
		}),
	})
}
