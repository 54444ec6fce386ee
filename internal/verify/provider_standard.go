package verify

func init() {
	register(&Provider{
		Name:             "standard",
		Title:            "Standard Webhooks",
		Family:           FamilyStandard,
		Signature:        "webhook-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)> (or svix-*)",
		Doc:              "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
		Notes:            "Any sender following Standard Webhooks or using Svix; the webhook-* and svix-* header families are both accepted, never mixed. The key is the base64 after whsec_. Asymmetric v1a signatures are skipped.",
		SignatureHeaders: standardHeadersList,
		DeliveryID:       oneOf(standardID),
		Event:            oneOf(fromJSON("type")),
		Template:         "{{event}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            standardProvider,
	})
}
