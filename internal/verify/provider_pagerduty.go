package verify

func init() {
	register(&Provider{
		Name:             "pagerduty",
		Title:            "PagerDuty",
		Family:           FamilyHMAC,
		Signature:        "X-PagerDuty-Signature: v1=<hex HMAC-SHA256(body)>[,v1=…]",
		Doc:              "https://developer.pagerduty.com/docs/webhooks/v3-overview/#verifying-signatures",
		Notes:            "V3 webhook subscriptions; V2 webhooks are unsigned and not supported. During a secret rotation PagerDuty sends one v1 per secret. It signs no time.",
		SignatureHeaders: []string{"X-PagerDuty-Signature"},
		DeliveryID:       oneOf(fromJSON("event.id")),
		Event:            oneOf(fromJSON("event.event_type")),
		Template:         "PagerDuty {{event}}: {{payload.event.data.title}} ({{payload.event.data.urgency}}) {{payload.event.data.html_url}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-PagerDuty-Signature"}, enc: encHex,
			list:  &listSpec{sep: ",", sigKey: "v1"},
			parts: []part{bodyPart()},
		}),
	})
}
