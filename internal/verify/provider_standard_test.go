package verify

import "time"

var _ = providerTest("standard", providerTests{
	vectors: []vector{{
		name:   "svix headers",
		source: "computed from https://docs.svix.com/receiving/verifying-payloads/how-manual: v1,<base64 HMAC-SHA256(id.timestamp.body)> under the decoded whsec_ key",
		cfg:    Config{Scheme: "standard", Secrets: []string{standardSecret}},
		req: func() *Request {
			body := `{"type":"invoice.paid","data":{"id":"in_1"}}`
			return post(body, "svix-id", "msg_2", "svix-timestamp", ts(0), "svix-signature", standardSig(nil, standardSecret, "msg_2", ts(0), body))()
		},
		now:  testNow,
		want: Result{DeliveryID: "msg_2", Event: "invoice.paid"},
	}, {
		name:   "spec example",
		source: "vector from https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
		cfg:    Config{Scheme: "standard", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
		req: post(`{"test": 2432232314}`, "webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek",
			"webhook-timestamp", "1614265330", "webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		now:  time.Unix(1614265330, 0),
		want: Result{DeliveryID: "msg_p5jXN8AQM9LWM0D4loKWxJek"},
	}},
	strip: func(r *Request) { r.Header.Del("Webhook-Signature"); r.Header.Del("Svix-Signature") },
})
