package verify

func init() {
	register(&Provider{
		Name:             "intercom",
		Title:            "Intercom",
		Family:           FamilyHMAC,
		Signature:        "X-Hub-Signature: sha1=<hex HMAC-SHA1(body)>",
		Doc:              "https://developers.intercom.com/docs/webhooks/webhook-notifications#signed-notifications",
		Notes:            "The secret is the app's client secret. Intercom signs no time.",
		SignatureHeaders: []string{"X-Hub-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("topic")),
		Template:         "Intercom {{event}}: {{payload.data.item.type}} {{payload.data.item.id}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA1, "X-Hub-Signature", "sha1=", encHex),
	})
}
