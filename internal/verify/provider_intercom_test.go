package verify

const intercomBody = `{"type":"notification_event","id":"notif_ccd8a4d2","topic":"conversation.user.created","data":{"item":{"type":"conversation","id":"147"}}}`

var _ = providerTest("intercom", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developers.intercom.com/docs/webhooks/webhook-notifications#signed-notifications: X-Hub-Signature: sha1=<hex HMAC-SHA1(body)>, with a fixed secret",
		cfg:    Config{Scheme: "intercom", Secrets: []string{genericSecret}},
		req:    post(intercomBody, "X-Hub-Signature", "sha1="+hexMAC(sha1H, genericSecret, intercomBody)),
		now:    testNow,
		want:   Result{DeliveryID: "notif_ccd8a4d2", Event: "conversation.user.created"},
	}},
})
