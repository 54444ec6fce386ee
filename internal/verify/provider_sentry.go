package verify

func init() {
	register(&Provider{
		Name:             "sentry",
		Title:            "Sentry",
		Family:           FamilyHMAC,
		Signature:        "Sentry-Hook-Signature: <hex HMAC-SHA256(body)> under the client secret",
		Doc:              "https://docs.sentry.io/organization/integrations/integration-platform/webhooks/#sentry-hook-signature",
		Notes:            "Sentry-Hook-Timestamp is sent but not signed, so it is not checked. Request-ID deduplicates redeliveries.",
		SignatureHeaders: []string{"Sentry-Hook-Signature"},
		DeliveryID:       oneOf(fromHeader("Request-ID")),
		Event: oneOf(fromFunc("header Sentry-Hook-Resource.body action", func(c *call) string {
			r, _ := headerValue(c.header(), "Sentry-Hook-Resource")
			return joinEvent(r, jsonField(c.json(), "action"))
		})),
		Template:  "Sentry {{event}}: {{payload.data.issue.title}}{{payload.data.event.title}}{{payload.data.error.title}}",
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build:     bodyMAC(algSHA256, "Sentry-Hook-Signature", "", encHex),
	})
}
