package verify

const calendlyBody = `{"event":"invitee.created","payload":{"email":"ann@example.com","name":"Ann","scheduled_event":{"name":"30 Minute Meeting"}}}`

var _ = providerTest("calendly", providerTests{
	vectors: []vector{{
		name:   "invitee.created",
		source: "computed from https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures: t=<unix>,v1=<hex HMAC-SHA256(t.body)>",
		cfg:    Config{Scheme: "calendly", Secrets: []string{genericSecret}},
		req:    post(calendlyBody, "Calendly-Webhook-Signature", "t="+ts(0)+",v1="+hexMAC(sha256H, genericSecret, ts(0), ".", calendlyBody)),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(calendlyBody), Event: "invitee.created"},
	}},
})
