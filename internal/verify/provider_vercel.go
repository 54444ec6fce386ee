package verify

func init() {
	register(&Provider{
		Name:             "vercel",
		Title:            "Vercel",
		Family:           FamilyHMAC,
		Signature:        "x-vercel-signature: <hex HMAC-SHA1(body)>",
		Doc:              "https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks",
		Notes:            "The secret is the webhook's (or the integration's client) secret. Vercel signs no time.",
		SignatureHeaders: []string{"X-Vercel-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Vercel {{event}}: {{payload.payload.deployment.url}}{{payload.payload.name}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA1, "X-Vercel-Signature", "", encHex),
	})
}
