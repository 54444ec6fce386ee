package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "mandrill",
		Title:            "Mailchimp Transactional (Mandrill)",
		Family:           FamilyHMAC,
		Signature:        "X-Mandrill-Signature: <base64 HMAC-SHA1(URL + sorted form fields)>",
		Doc:              "https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests",
		Notes:            "Mandrill posts the form field mandrill_events (JSON, embedded as such). The URL is the one registered (set public_url behind a proxy that is not trusted). New webhooks are checked with a HEAD request, answered 200. Mandrill signs no time.",
		Body:             BodyForm,
		FormJSONFields:   []string{"mandrill_events"},
		SignatureHeaders: []string{"X-Mandrill-Signature"},
		Handshake:        "HEAD (webhook creation) → 200",
		HandshakeMethods: []string{http.MethodHead},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event:            oneOf(fromJSON("mandrill_events.0.event")),
		Template:         "Mandrill {{event}}: {{payload.mandrill_events.0.msg.subject}} to {{payload.mandrill_events.0.msg.email}}",
		Words:            []string{"secret", "public_url"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: withHandshake(macProvider(macSpec{
			alg: algSHA1, headers: []string{"X-Mandrill-Signature"}, enc: encBase64,
			parts: []part{urlPart(nil), formPart()},
		}), headHandshake("mandrill webhook check")),
	})
}
