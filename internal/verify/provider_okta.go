package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "okta",
		Title:            "Okta Event Hooks",
		Family:           FamilyToken,
		Signature:        "Authorization: <the secret> (or the header named by header)",
		Doc:              "https://developer.okta.com/docs/concepts/event-hooks/",
		Notes:            "Okta sends the authentication header and secret configured on the event hook (also with the verification request). The body is not signed.",
		SignatureHeaders: []string{"Authorization"},
		Handshake:        "GET with X-Okta-Verification-Challenge (and the token) → {\"verification\": the challenge}",
		HandshakeMethods: []string{http.MethodGet},
		DeliveryID:       oneOf(fromJSON("eventId")),
		Event:            oneOf(fromJSON("data.events.0.eventType")),
		Template:         "Okta {{event}}: {{payload.data.events.0.displayMessage}} ({{payload.data.events.0.actor.alternateId}})",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build: withHandshake(tokenProvider(tokenSpec{header: "Authorization"}), handshakeSpec{
			detect: func(c *call) bool {
				return c.r.method() == http.MethodGet && len(c.header().Values("X-Okta-Verification-Challenge")) > 0
			},
			auth: hsSigned,
			answer: func(c *call, _ scheme) (*Answer, error) {
				v, _ := headerValue(c.header(), "X-Okta-Verification-Challenge")
				if cleanChallenge(v) == "" {
					return nil, fail(ReasonBadChallenge, "X-Okta-Verification-Challenge")
				}
				return jsonAnswer("okta verification", "verification", v), nil
			},
		}),
	})
}
