package verify

import "strings"

// hubspotDecode decodes the characters HubSpot decodes in the URI before
// signing (its v3 instructions list them).
var hubspotDecode = strings.NewReplacer(
	"%3A", ":", "%2F", "/", "%3F", "?", "%40", "@", "%21", "!", "%24", "$",
	"%27", "'", "%28", "(", "%29", ")", "%2A", "*", "%2C", ",", "%3B", ";",
)

func init() {
	register(&Provider{
		Name:             "hubspot",
		Title:            "HubSpot",
		Family:           FamilyHMAC,
		Signature:        "X-HubSpot-Signature-v3: <base64 HMAC-SHA256(method+URI+body+timestamp)>, X-HubSpot-Request-Timestamp (ms)",
		Doc:              "https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation",
		Notes:            "Signature v3 (v1 and v2 are not supported). The URI is the full URL HubSpot called (set public_url behind a proxy that is not trusted), with some escapes decoded as HubSpot does. HubSpot posts an array of events: templates see it as payload.events.",
		ArrayMember:      "events",
		SignatureHeaders: []string{"X-Hubspot-Signature-V3", "X-Hubspot-Signature"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("events.0.subscriptionType")),
		Template:         "HubSpot {{event}}: object {{payload.events.0.objectId}} in portal {{payload.events.0.portalId}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret", "public_url"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-Hubspot-Signature-V3"}, enc: encBase64,
			parts:  []part{methodPart(), urlPart(hubspotDecode.Replace), bodyPart(), tsPart()},
			tsFrom: tsHeader, tsHeader: "X-Hubspot-Request-Timestamp", tsUnit: unitMillis,
		}),
	})
}
