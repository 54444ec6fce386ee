package verify

func init() {
	register(&Provider{
		Name:             "jira",
		Title:            "Jira",
		Family:           FamilyHMAC,
		Signature:        "X-Hub-Signature: sha256=<hex HMAC-SHA256(body)>",
		Doc:              "https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks",
		Notes:            "Admin webhooks with a secret (Jira Cloud). Jira signs no time; X-Atlassian-Webhook-Identifier is the same on retries.",
		SignatureHeaders: []string{"X-Hub-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Atlassian-Webhook-Identifier")),
		Event:            oneOf(fromJSON("webhookEvent")),
		Template:         "Jira {{event}}: {{payload.issue.key}} {{payload.issue.fields.summary}} by {{payload.user.displayName}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Hub-Signature", "sha256=", encHex),
	})
}
