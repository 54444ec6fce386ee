package verify

const wooBody = `{"id":727,"number":"727","status":"processing","total":"29.35","currency":"USD","billing":{"email":"john.doe@example.com"}}`

var _ = providerTest("woocommerce", providerTests{
	vectors: []vector{{
		name:   "order.created",
		source: "computed from https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks: base64 HMAC-SHA256 of the body",
		cfg:    Config{Scheme: "woocommerce", Secrets: []string{genericSecret}},
		req: post(wooBody, "X-WC-Webhook-Signature", b64MAC(sha256H, genericSecret, wooBody),
			"X-WC-Webhook-Topic", "order.created", "X-WC-Webhook-Delivery-ID", "ec2e57a2a42e1cb9ad3e9f4e0b0ba1f5"),
		now:  testNow,
		want: Result{DeliveryID: "ec2e57a2a42e1cb9ad3e9f4e0b0ba1f5", Event: "order.created"},
	}},
	handshakes: []handshakeCase{{
		name:   "ping on save",
		source: "computed from https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks: the ping is an unsigned form post of webhook_id",
		req:    post("webhook_id=12", "Content-Type", formCT),
		status: 200,
	}, {
		name:  "anything else unsigned is not a handshake",
		req:   post("webhook_id=12&x=1", "Content-Type", formCT),
		notHS: true,
	}},
})
