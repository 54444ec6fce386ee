package verify

import (
	"net/http"
	"regexp"
)

// wooPing is the form body WooCommerce posts, unsigned, when a webhook is
// saved.
var wooPing = regexp.MustCompile(`^webhook_id=[0-9]{1,19}$`)

func init() {
	register(&Provider{
		Name:             "woocommerce",
		Title:            "WooCommerce",
		Family:           FamilyHMAC,
		Signature:        "X-WC-Webhook-Signature: <base64 HMAC-SHA256(body)>",
		Doc:              "https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks",
		Notes:            "WooCommerce signs no time; X-WC-Webhook-Delivery-ID deduplicates redeliveries. The unsigned ping it posts when a webhook is saved (webhook_id=N, a form) is answered 200 and never dispatched.",
		SignatureHeaders: []string{"X-Wc-Webhook-Signature"},
		Handshake:        "POST webhook_id=<n> (unsigned ping on save) → 200",
		DeliveryID:       oneOf(fromHeader("X-WC-Webhook-Delivery-ID")),
		Event:            oneOf(fromHeader("X-WC-Webhook-Topic")),
		Template:         "WooCommerce {{event}}: order #{{payload.number}} {{payload.status}} {{payload.total}} {{payload.currency}} by {{payload.billing.email}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: withHandshake(bodyMAC(algSHA256, "X-Wc-Webhook-Signature", "", encBase64), handshakeSpec{
			detect: func(c *call) bool {
				return isPost(c) && len(c.header().Values("X-Wc-Webhook-Signature")) == 0 && wooPing.Match(c.body())
			},
			auth:   hsNone,
			answer: func(*call, scheme) (*Answer, error) { return emptyAnswer("woocommerce ping", http.StatusOK), nil },
		}),
	})
}
