package verify

const resendBody = `{"type":"email.delivered","created_at":"2024-02-22T23:41:12.126Z","data":{"email_id":"56761188-7520-42d8-8898-ff6fc54ce618","subject":"Sending this example","to":["delivered@resend.dev"]}}`

var _ = providerTest("resend", providerTests{
	vectors: []vector{{
		name:   "email.delivered",
		source: "computed from https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests: v1,<base64 HMAC-SHA256(id.timestamp.body)> under the decoded whsec_ key",
		cfg:    Config{Scheme: "resend", Secrets: []string{standardSecret}},
		req: post(resendBody, "svix-id", "msg_resend1", "svix-timestamp", ts(0),
			"svix-signature", standardSig(nil, standardSecret, "msg_resend1", ts(0), resendBody)),
		now:  testNow,
		want: Result{DeliveryID: "msg_resend1", Event: "email.delivered"},
	}},
	strip: func(r *Request) { r.Header.Del("Webhook-Signature"); r.Header.Del("Svix-Signature") },
})
