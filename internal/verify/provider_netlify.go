package verify

import (
	"crypto/subtle"
)

func init() {
	register(&Provider{
		Name:             "netlify",
		Title:            "Netlify",
		Family:           FamilyJWT,
		Signature:        "X-Webhook-Signature: <JWS HS256 {iss: netlify, sha256: hex SHA-256 of the body}>",
		Doc:              "https://docs.netlify.com/site-deploys/deploy-notifications/#payload-signature",
		Notes:            "The secret is the notification's JWS secret token. The token carries no time: it is valid as long as the body matches.",
		SignatureHeaders: []string{"X-Webhook-Signature"},
		DeliveryID: oneOf(fromFunc("body id.state", func(c *call) string {
			return joinEvent(jsonField(c.json(), "id"), jsonField(c.json(), "state"))
		})),
		Event:     oneOf(fromJSON("state")),
		Template:  "Netlify deploy {{event}}: {{payload.name}} {{payload.deploy_ssl_url}}{{payload.error_message}}",
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build: jwtProvider(jwtSpec{header: "X-Webhook-Signature", check: func(c *call, cl jwtClaims) error {
			if cl.Iss != "netlify" {
				return fail(ReasonBadClaims, "X-Webhook-Signature")
			}
			if subtle.ConstantTimeCompare([]byte(cl.Sha256), []byte(c.bodySHA256())) != 1 {
				return fail(ReasonBadSignature, "X-Webhook-Signature")
			}
			return nil
		}}, nil),
	})
}
