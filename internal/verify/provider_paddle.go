package verify

func init() {
	register(&Provider{
		Name:             "paddle",
		Title:            "Paddle",
		Family:           FamilyHMAC,
		Signature:        "Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256(ts:body)>",
		Doc:              "https://developer.paddle.com/webhooks/signature-verification",
		Notes:            "Paddle Billing (the current API); Paddle Classic's RSA p_signature is not supported. Paddle's SDKs allow 5 s of clock difference; the edge's default is 5 m (tolerance).",
		SignatureHeaders: []string{"Paddle-Signature"},
		DeliveryID:       oneOf(fromJSON("notification_id"), fromJSON("event_id")),
		Event:            oneOf(fromJSON("event_type")),
		Template:         "Paddle {{event}}: {{payload.data.id}} ({{payload.data.status}})",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Paddle-Signature"}, enc: encHex,
			list:   &listSpec{sep: ";", tsKey: "ts", sigKey: "h1"},
			parts:  []part{tsPart(), lit(":"), bodyPart()},
			tsFrom: tsList,
		}),
	})
}
