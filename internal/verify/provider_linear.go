package verify

import "time"

func init() {
	register(&Provider{
		Name:             "linear",
		Title:            "Linear",
		Family:           FamilyHMAC,
		Signature:        "Linear-Signature: <hex HMAC-SHA256(body)>; webhookTimestamp (ms) in the signed body",
		Doc:              "https://linear.app/developers/webhooks#securing-webhooks",
		Notes:            "The signed time is the body's webhookTimestamp (milliseconds); Linear asks for a one minute window.",
		SignatureHeaders: []string{"Linear-Signature"},
		DeliveryID:       oneOf(fromHeader("Linear-Delivery")),
		Event: oneOf(fromFunc("body type.action", func(c *call) string {
			return joinEvent(jsonField(c.json(), "type"), jsonField(c.json(), "action"))
		})),
		Template:  "Linear {{event}}: {{payload.data.identifier}} {{payload.data.title}} {{payload.url}}",
		Tolerance: time.Minute,
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build: macProvider(macSpec{
			headers: []string{"Linear-Signature"}, enc: encHex,
			parts:  []part{bodyPart()},
			tsFrom: tsBody, tsPath: []string{"webhookTimestamp"}, tsUnit: unitMillis,
		}),
	})
}
