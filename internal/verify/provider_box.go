package verify

import "time"

func init() {
	register(&Provider{
		Name:             "box",
		Title:            "Box",
		Family:           FamilyHMAC,
		Signature:        "BOX-SIGNATURE-PRIMARY / -SECONDARY: <base64 HMAC-SHA256(body+BOX-DELIVERY-TIMESTAMP)>",
		Doc:              "https://developer.box.com/guides/webhooks/v2/signatures-v2/",
		Notes:            "Give the primary and the secondary key as two secrets; either header may match either. Box allows 10 minutes of clock difference.",
		SignatureHeaders: []string{"Box-Signature-Primary", "Box-Signature-Secondary"},
		DeliveryID:       oneOf(fromHeader("Box-Delivery-Id")),
		Event:            oneOf(fromJSON("trigger")),
		Template:         "Box {{event}}: {{payload.source.type}} {{payload.source.name}} by {{payload.created_by.name}}",
		Tolerance:        10 * time.Minute,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Box-Signature-Primary", "Box-Signature-Secondary"}, enc: encBase64,
			parts:  []part{bodyPart(), tsPart()},
			tsFrom: tsHeader, tsHeader: "Box-Delivery-Timestamp", tsUnit: unitRFC3339,
		}),
	})
}
