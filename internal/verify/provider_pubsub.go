package verify

import (
	"errors"
	"slices"
	"time"
)

// Google's OIDC token issuers and key set.
var (
	googleIssuers = []string{"accounts.google.com", "https://accounts.google.com"}
	googleHosts   = hostList{names: []string{"www.googleapis.com"}}
)

// googleJWKS is where Google publishes its OIDC signing keys.
const googleJWKS = "https://www.googleapis.com/oauth2/v3/certs"

// googleKeysTTL is how long Google's key set is kept (keys rotate about
// daily and overlap).
const googleKeysTTL = time.Hour

func init() {
	register(&Provider{
		Name:             "pubsub",
		Title:            "Google Cloud Pub/Sub push",
		Family:           FamilyJWT,
		Signature:        "Authorization: Bearer <Google OIDC JWT RS256: iss accounts.google.com, aud, email>",
		Doc:              "https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions",
		Notes:            "audience is the subscription's audience (by default the push URL); service_account the email the subscription pushes as (required: any project can push to a URL). Google's key set is fetched from www.googleapis.com (or jwks: a file, or an https URL on cert_hosts), kept an hour, refetched at most once a minute for an unknown key id. The JWT authenticates the sender, not the body: the body is not signed.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromJSON("message.messageId")),
		Event:            oneOf(fromJSON("message.attributes.eventType"), fromJSON("subscription")),
		Template:         "Pub/Sub {{event}}: message {{payload.message.messageId}} on {{payload.subscription}}",
		Tolerance:        time.Minute,
		Words:            []string{"audience", "service_account", "jwks", "cert_hosts"},
		Required:         []string{"audience", "service_account"},
		build: func(b *builder) (scheme, error) {
			aud, sa := b.cfg.Audience, b.cfg.ServiceAccount
			return jwtProvider(jwtSpec{header: "Authorization", needExp: true, check: func(_ *call, cl jwtClaims) error {
				if !contains(googleIssuers, cl.Iss) || !cl.hasAudience(aud) || cl.Email != sa || !cl.emailVerified() {
					return fail(ReasonBadClaims, "Authorization")
				}
				return nil
			}}, func(b *builder) (keySource, error) {
				if len(b.cfg.CertHosts) > 0 && b.cfg.JWKS == "" {
					return nil, errors.New("cert_hosts: only with a jwks URL")
				}
				return b.jwksSource(googleJWKS, googleHosts, googleKeysTTL)
			})(b)
		},
	})
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	return slices.Contains(list, s)
}
