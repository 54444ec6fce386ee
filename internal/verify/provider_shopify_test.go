package verify

const shopifyBody = `{"id":820982911946154500,"name":"#9999","email":"jon@example.com","total_price":"403.00","currency":"USD"}`

var _ = providerTest("shopify", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook: X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "shopify", Secrets: []string{genericSecret}},
		req:    post(shopifyBody, "X-Shopify-Hmac-Sha256", ""+b64MAC(sha256H, genericSecret, shopifyBody), "X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "X-Shopify-Topic", "orders/create", "X-Shopify-Shop-Domain", "shop.myshopify.com"),
		now:    testNow,
		want:   Result{DeliveryID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", Event: "orders/create"},
	}},
})
