package verify

func init() {
	register(&Provider{
		Name:             "bitbucket",
		Title:            "Bitbucket",
		Family:           FamilyHMAC,
		Signature:        "X-Hub-Signature: sha256=<hex HMAC-SHA256(body)>",
		Doc:              "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks",
		Notes:            "Bitbucket Cloud and Data Center sign the same way once the webhook has a secret. Bitbucket signs no time.",
		SignatureHeaders: []string{"X-Hub-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Request-UUID"), fromHeader("X-Request-Id")),
		Event:            oneOf(fromHeader("X-Event-Key")),
		Template:         "Bitbucket {{event}} on {{payload.repository.full_name}} by {{payload.actor.display_name}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Hub-Signature", "sha256=", encHex),
	})
}
