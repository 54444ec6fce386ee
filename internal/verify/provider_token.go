package verify

func init() {
	register(&Provider{
		Name:             "token",
		Title:            "Any sender with a static token",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token>, or the header named by header",
		Doc:              "https://www.rfc-editor.org/rfc/rfc6750#section-2.1",
		Notes:            "For senders that can only add a fixed header. The token authenticates the sender, not the body: prefer a signing provider where the sender offers one.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromHeader("Idempotency-Key"), fromJSON("id")),
		Event:            oneOf(fromJSON("event"), fromJSON("type")),
		Template:         "{{event}}",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build:            tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
