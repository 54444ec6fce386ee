package verify

// stripeList is the Stripe-Signature header's shape (also Calendly's).
var stripeList = &listSpec{sep: ",", tsKey: "t", sigKey: "v1"}

func init() {
	register(&Provider{
		Name:             "stripe",
		Title:            "Stripe",
		Family:           FamilyHMAC,
		Signature:        "Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(t.body)>[,v1=…]",
		Doc:              "https://docs.stripe.com/webhooks#verify-manually",
		Notes:            "The whsec_ secret is used as is, not decoded. During Stripe's own secret roll it sends one v1 per secret; any may match.",
		SignatureHeaders: []string{"Stripe-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Stripe {{event}} ({{payload.id}}): {{payload.data.object.object}} {{payload.data.object.id}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Stripe-Signature"}, list: stripeList, enc: encHex,
			parts:  []part{tsPart(), lit("."), bodyPart()},
			tsFrom: tsList,
		}),
	})
}
