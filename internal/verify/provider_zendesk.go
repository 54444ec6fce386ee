package verify

func init() {
	register(&Provider{
		Name:             "zendesk",
		Title:            "Zendesk",
		Family:           FamilyHMAC,
		Signature:        "X-Zendesk-Webhook-Signature: <base64 HMAC-SHA256(timestamp+body)>, X-Zendesk-Webhook-Signature-Timestamp (RFC 3339)",
		Doc:              "https://developer.zendesk.com/documentation/webhooks/verifying/",
		Notes:            "The key is the webhook's signing secret.",
		SignatureHeaders: []string{"X-Zendesk-Webhook-Signature"},
		DeliveryID:       oneOf(fromHeader("X-Zendesk-Webhook-Invocation-Id"), fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Zendesk {{event}}: {{payload.detail.subject}} ({{payload.detail.status}})",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-Zendesk-Webhook-Signature"}, enc: encBase64,
			parts:  []part{tsPart(), bodyPart()},
			tsFrom: tsHeader, tsHeader: "X-Zendesk-Webhook-Signature-Timestamp", tsUnit: unitRFC3339,
		}),
	})
}
