package verify

import "time"

func init() {
	register(&Provider{
		Name:             "calendly",
		Title:            "Calendly",
		Family:           FamilyHMAC,
		Signature:        "Calendly-Webhook-Signature: t=<unix>,v1=<hex HMAC-SHA256(t.body)>",
		Doc:              "https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures",
		Notes:            "The key is the webhook subscription's signing key. Calendly recommends a 3 minute tolerance. It sends no delivery id: the body's digest deduplicates redeliveries.",
		SignatureHeaders: []string{"Calendly-Webhook-Signature"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("event")),
		Template:         "Calendly {{event}}: {{payload.payload.name}} <{{payload.payload.email}}> for {{payload.payload.scheduled_event.name}}",
		Tolerance:        3 * time.Minute,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Calendly-Webhook-Signature"}, enc: encHex, list: stripeList,
			parts:  []part{tsPart(), lit("."), bodyPart()},
			tsFrom: tsList,
		}),
	})
}
