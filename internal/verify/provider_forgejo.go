package verify

func init() {
	register(&Provider{
		Name:             "forgejo",
		Title:            "Forgejo",
		Family:           FamilyHMAC,
		Signature:        "X-Forgejo-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://forgejo.org/docs/latest/user/webhooks/",
		Notes:            "Forgejo also sends the X-Gitea-* headers; the X-Forgejo-* ones are read. It signs no time.",
		SignatureHeaders: []string{"X-Forgejo-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Forgejo-Delivery")),
		Event:            oneOf(fromHeader("X-Forgejo-Event")),
		Template:         "Forgejo {{event}} on {{payload.repository.full_name}} by {{payload.sender.login}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Forgejo-Signature", "", encHex),
	})
}
