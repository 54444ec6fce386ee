package verify

func init() {
	register(&Provider{
		Name:             "mux",
		Title:            "Mux",
		Family:           FamilyHMAC,
		Signature:        "Mux-Signature: t=<unix>,v1=<hex HMAC-SHA256(t.body)>",
		Doc:              "https://www.mux.com/docs/core/verify-webhook-signatures",
		Notes:            "The key is the webhook's signing secret.",
		SignatureHeaders: []string{"Mux-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Mux {{event}}: {{payload.object.type}} {{payload.data.id}} {{payload.data.status}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Mux-Signature"}, enc: encHex, list: stripeList,
			parts:  []part{tsPart(), lit("."), bodyPart()},
			tsFrom: tsList,
		}),
	})
}
