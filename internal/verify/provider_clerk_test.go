package verify

const clerkBody = `{"type":"user.created","object":"event","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC","email_addresses":[{"email_address":"example@example.org"}]}}`

var _ = providerTest("clerk", providerTests{
	vectors: []vector{{
		name:   "user.created",
		source: "computed from https://clerk.com/docs/webhooks/sync-data#verify-webhook-deliveries: v1,<base64 HMAC-SHA256(id.timestamp.body)> under the decoded whsec_ key",
		cfg:    Config{Scheme: "clerk", Secrets: []string{standardSecret}},
		req: post(clerkBody, "svix-id", "msg_clerk1", "svix-timestamp", ts(0),
			"svix-signature", standardSig(nil, standardSecret, "msg_clerk1", ts(0), clerkBody)),
		now:  testNow,
		want: Result{DeliveryID: "msg_clerk1", Event: "user.created"},
	}},
	strip: func(r *Request) { r.Header.Del("Webhook-Signature"); r.Header.Del("Svix-Signature") },
})
