package verify

func init() {
	register(&Provider{
		Name:             "postmark",
		Title:            "Postmark",
		Family:           FamilyToken,
		Signature:        "Authorization: Basic <user:password from the webhook URL>",
		Doc:              "https://postmarkapp.com/developer/webhooks/webhooks-overview#protecting-your-webhook",
		Notes:            "Postmark does not sign webhooks: put basic auth credentials in the webhook URL (https://user:password@host/…) and give user:password as the secret. The body is not authenticated.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID: oneOf(fromFunc("body RecordType.MessageID", func(c *call) string {
			id := jsonField(c.json(), "MessageID")
			if id == "" {
				return ""
			}
			return joinEvent(jsonField(c.json(), "RecordType"), id)
		})),
		Event:    oneOf(fromJSON("RecordType")),
		Template: "Postmark {{event}}: {{payload.Subject}} {{payload.From}}{{payload.Recipient}}{{payload.Email}}",
		Words:    []string{"secret"},
		Required: []string{"secret"},
		build:    tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
