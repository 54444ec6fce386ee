package verify

var stripeEvent = `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"object":"payment_intent","id":"pi_1"}}}`

var _ = providerTest("stripe", providerTests{
	vectors: []vector{{
		name:   "payment_intent.succeeded",
		source: "computed from https://docs.stripe.com/webhooks#verify-manually: t=<unix>,v1=<hex HMAC-SHA256(t.body)> with the whsec_ secret as is",
		cfg:    Config{Scheme: "stripe", Secrets: []string{stripeSecret}},
		req:    post(stripeEvent, "Stripe-Signature", stripeHeader(ts(0), stripeEvent, stripeSecret)),
		now:    testNow,
		want:   Result{DeliveryID: "evt_1", Event: "payment_intent.succeeded"},
	}},
})
