package verify

func init() {
	register(&Provider{
		Name:             "resend",
		Title:            "Resend",
		Family:           FamilyStandard,
		Signature:        "svix-signature: v1,<base64 HMAC-SHA256(id.timestamp.body)> (Standard Webhooks)",
		Doc:              "https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests",
		Notes:            "Resend delivers through Svix: svix-* headers, whsec_ signing secret. The signed svix-id is the delivery id.",
		SignatureHeaders: standardHeadersList,
		DeliveryID:       oneOf(standardID),
		Event:            oneOf(fromJSON("type")),
		Template:         "Resend {{event}}: {{payload.data.subject}} to {{payload.data.to.0}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            standardProvider,
	})
}
