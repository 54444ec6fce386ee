package verify

func init() {
	register(&Provider{
		Name:             "gitea",
		Title:            "Gitea",
		Family:           FamilyHMAC,
		Signature:        "X-Gitea-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://docs.gitea.com/usage/webhooks",
		Notes:            "Gitea signs no time; X-Gitea-Delivery deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Gitea-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Gitea-Delivery")),
		Event:            oneOf(fromHeader("X-Gitea-Event")),
		Template:         "Gitea {{event}} on {{payload.repository.full_name}} by {{payload.sender.login}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Gitea-Signature", "", encHex),
	})
}
