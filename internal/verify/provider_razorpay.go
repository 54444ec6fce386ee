package verify

func init() {
	register(&Provider{
		Name:             "razorpay",
		Title:            "Razorpay",
		Family:           FamilyHMAC,
		Signature:        "X-Razorpay-Signature: <hex HMAC-SHA256(body)>",
		Doc:              "https://razorpay.com/docs/webhooks/validate-test/",
		Notes:            "Razorpay signs no time; x-razorpay-event-id deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Razorpay-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Razorpay-Event-Id")),
		Event:            oneOf(fromJSON("event")),
		Template:         "Razorpay {{event}}: payment {{payload.payload.payment.entity.id}} {{payload.payload.payment.entity.amount}} {{payload.payload.payment.entity.currency}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA256, "X-Razorpay-Signature", "", encHex),
	})
}
