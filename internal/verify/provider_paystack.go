package verify

func init() {
	register(&Provider{
		Name:             "paystack",
		Title:            "Paystack",
		Family:           FamilyHMAC,
		Signature:        "x-paystack-signature: <hex HMAC-SHA512(body)> under the secret key",
		Doc:              "https://paystack.com/docs/payments/webhooks/#verify-event-origin",
		Notes:            "The key is the account's secret key. Paystack signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Paystack-Signature"},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromJSON("event")),
		Template:         "Paystack {{event}}: {{payload.data.reference}} {{payload.data.amount}} {{payload.data.currency}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA512, "X-Paystack-Signature", "", encHex),
	})
}
