package verify

func init() {
	register(&Provider{
		Name:             "telnyx",
		Title:            "Telnyx",
		Family:           FamilyEd25519,
		Signature:        "telnyx-signature-ed25519: <base64 Ed25519(timestamp|body)>, telnyx-timestamp",
		Doc:              "https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks#webhook-signing",
		Notes:            "public_key is the account's public key (Mission Control → Keys & Credentials → Public Key, base64).",
		SignatureHeaders: []string{"Telnyx-Signature-Ed25519"},
		DeliveryID:       oneOf(fromJSON("data.id")),
		Event:            oneOf(fromJSON("data.event_type")),
		Template:         "Telnyx {{event}} from {{payload.data.payload.from.phone_number}}: {{payload.data.payload.text}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"public_key"},
		Required:         []string{"public_key"},
		SignsBody:        true,
		build: ed25519Provider(pubSpec{
			sigHeader: "Telnyx-Signature-Ed25519", tsHeader: "Telnyx-Timestamp", enc: encBase64, sep: "|",
		}),
	})
}
