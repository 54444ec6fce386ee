package verify

const openaiBody = `{"object":"event","id":"evt_685343a1381c819085d44c354e1b330e","type":"response.completed","created_at":1750287018,"data":{"id":"resp_abc123"}}`

var _ = providerTest("openai", providerTests{
	vectors: []vector{{
		name:   "response.completed",
		source: "computed from https://platform.openai.com/docs/guides/webhooks#verifying-webhook-signatures: v1,<base64 HMAC-SHA256(id.timestamp.body)> under the decoded whsec_ key",
		cfg:    Config{Scheme: "openai", Secrets: []string{standardSecret}},
		req: post(openaiBody, "webhook-id", "msg_openai1", "webhook-timestamp", ts(0),
			"webhook-signature", standardSig(nil, standardSecret, "msg_openai1", ts(0), openaiBody)),
		now:  testNow,
		want: Result{DeliveryID: "msg_openai1", Event: "response.completed"},
	}},
	strip: func(r *Request) { r.Header.Del("Webhook-Signature"); r.Header.Del("Svix-Signature") },
})
