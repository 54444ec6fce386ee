package verify

func init() {
	register(&Provider{
		Name:             "clerk",
		Title:            "Clerk",
		Family:           FamilyStandard,
		Signature:        "svix-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)> (Standard Webhooks)",
		Doc:              "https://clerk.com/docs/webhooks/sync-data#verify-webhook-deliveries",
		Notes:            "Clerk delivers through Svix: svix-* headers, whsec_ signing secret. The signed svix-id is the delivery id.",
		SignatureHeaders: standardHeadersList,
		DeliveryID:       oneOf(standardID),
		Event:            oneOf(fromJSON("type")),
		Template:         "Clerk {{event}}: {{payload.data.id}} {{payload.data.email_addresses.0.email_address}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            standardProvider,
	})
}
