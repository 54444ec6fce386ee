package verify

func init() {
	register(&Provider{
		Name:             "github",
		Title:            "GitHub",
		Family:           FamilyHMAC,
		Signature:        "X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)>",
		Doc:              "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
		Notes:            "The legacy SHA-1 X-Hub-Signature is never verified. GitHub signs no time: X-GitHub-Delivery only deduplicates honest redeliveries. Set the webhook's content type to application/json.",
		SignatureHeaders: []string{"X-Hub-Signature-256", "X-Hub-Signature"},
		DeliveryID:       oneOf(fromHeader("X-GitHub-Delivery")),
		Event:            oneOf(fromHeader("X-GitHub-Event")),
		Template:         "GitHub {{event}} on {{payload.repository.full_name}} by {{payload.sender.login}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Hub-Signature-256", "sha256=", encHex),
	})
}
