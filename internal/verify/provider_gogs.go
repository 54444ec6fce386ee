package verify

func init() {
	register(&Provider{
		Name:             "gogs",
		Title:            "Gogs",
		Family:           FamilyHMAC,
		Signature:        "X-Gogs-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://gogs.io/docs/features/webhook",
		Notes:            "Gogs signs no time.",
		SignatureHeaders: []string{"X-Gogs-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Gogs-Delivery")),
		Event:            oneOf(fromHeader("X-Gogs-Event")),
		Template:         "Gogs {{event}} on {{payload.repository.full_name}} by {{payload.sender.username}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Gogs-Signature", "", encHex),
	})
}
