package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "trello",
		Title:            "Trello",
		Family:           FamilyHMAC,
		Signature:        "X-Trello-Webhook: <base64 HMAC-SHA1(body + callbackURL)> under the app secret",
		Doc:              "https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/#webhook-signatures",
		Notes:            "The callback URL is the one registered (set public_url behind a proxy that is not trusted). Trello checks a new webhook with a HEAD request, answered 200 at the edge. Trello signs no time.",
		SignatureHeaders: []string{"X-Trello-Webhook"},
		Handshake:        "HEAD (webhook creation) → 200",
		HandshakeMethods: []string{http.MethodHead},
		DeliveryID:       oneOf(fromJSON("action.id")),
		Event:            oneOf(fromJSON("action.type")),
		Template:         "Trello {{event}} on {{payload.model.name}} by {{payload.action.memberCreator.fullName}}",
		Words:            []string{"secret", "public_url"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: withHandshake(macProvider(macSpec{
			alg: algSHA1, headers: []string{"X-Trello-Webhook"}, enc: encBase64,
			parts: []part{bodyPart(), urlPart(nil)},
		}), headHandshake("trello webhook check")),
	})
}
