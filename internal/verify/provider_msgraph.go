package verify

import (
	"net/http"
)

// maxGraphNotifications bounds the notifications of one Graph post whose
// clientState is checked.
const maxGraphNotifications = 1000

// graphScheme checks that every notification's clientState is the
// configured one.
type graphScheme struct{ state secretSum }

func init() {
	register(&Provider{
		Name:             "msgraph",
		Title:            "Microsoft Graph change notifications",
		Family:           FamilyToken,
		Signature:        "clientState: <the subscription's secret> in every notification of the body",
		Doc:              "https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks",
		Notes:            "client_state is the secret given when the subscription was created; every notification must carry it. Rich notifications' validationTokens (JWTs) are not checked. Graph sends no delivery id: the body's digest deduplicates redeliveries.",
		Handshake:        "POST or GET ?validationToken=… → the token (text/plain)",
		HandshakeMethods: []string{http.MethodGet},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("value.0.changeType"), fromJSON("value.0.lifecycleEvent")),
		Template:         "Microsoft Graph {{event}}: {{payload.value.0.resource}}",
		Words:            []string{"client_state"},
		Required:         []string{"client_state"},
		build: withHandshake(func(b *builder) (scheme, error) {
			st, err := b.secretWord("client_state", b.cfg.ClientState, 8)
			return &graphScheme{state: st}, err
		}, handshakeSpec{
			detect: func(c *call) bool { return c.r.query().Has("validationToken") },
			auth:   hsNone,
			answer: func(c *call, _ scheme) (*Answer, error) {
				tok := cleanChallenge(c.r.query().Get("validationToken"))
				if tok == "" {
					return nil, fail(ReasonBadChallenge, "")
				}
				return textAnswer("graph validationToken", tok), nil
			},
		}),
	})
}

// verify implements scheme.
func (s *graphScheme) verify(c *call) error {
	doc := c.body()
	if jsonValue(doc, "value", "0") == nil {
		return fail(ReasonMissingSignature, "")
	}
	for i := range maxGraphNotifications {
		n := jsonValue(doc, "value", itoa(i))
		if n == nil {
			return nil
		}
		st := jsonField(n, "clientState")
		if st == "" {
			return fail(ReasonMissingSignature, "")
		}
		if !s.state.matches(st) {
			return fail(ReasonBadToken, "")
		}
	}
	return fail(ReasonMalformedBody, "")
}
