package verify

func init() {
	register(&Provider{
		Name:             "shopify",
		Title:            "Shopify",
		Family:           FamilyHMAC,
		Signature:        "X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(body)>",
		Doc:              "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook",
		Notes:            "The secret is the app's client secret (or the store's webhook signing key). Shopify signs no time; X-Shopify-Webhook-Id is the same on every retry of a delivery.",
		SignatureHeaders: []string{"X-Shopify-Hmac-Sha256"},
		DeliveryID:       oneOf(fromHeader("X-Shopify-Webhook-Id"), fromHeader("X-Shopify-Event-Id")),
		Event:            oneOf(fromHeader("X-Shopify-Topic")),
		Template:         "Shopify {{event}} from {{headers.x-shopify-shop-domain}}: order {{payload.name}} {{payload.total_price}} {{payload.currency}} by {{payload.email}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Shopify-Hmac-Sha256", "", encBase64),
	})
}
