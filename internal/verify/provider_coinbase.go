package verify

func init() {
	register(&Provider{
		Name:             "coinbase",
		Title:            "Coinbase Commerce",
		Family:           FamilyHMAC,
		Signature:        "X-CC-Webhook-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://docs.cdp.coinbase.com/commerce/docs/webhooks-security",
		Notes:            "Coinbase Commerce signs no time.",
		SignatureHeaders: []string{"X-CC-Webhook-Signature"},
		DeliveryID:       oneOf(fromJSON("event.id")),
		Event:            oneOf(fromJSON("event.type")),
		Template:         "Coinbase Commerce {{event}}: charge {{payload.event.data.code}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-CC-Webhook-Signature", "", encHex),
	})
}
