package verify

import "time"

func init() {
	register(&Provider{
		Name:             "monday",
		Title:            "monday.com",
		Family:           FamilyJWT,
		Signature:        "Authorization: <JWT HS256 under the app's signing secret>",
		Doc:              "https://developer.monday.com/apps/docs/integration-authorization#authorization-header",
		Notes:            "Integration (app) webhooks carry a JWT signed with the app's Signing Secret; board webhooks created in the UI are unsigned and not supported. The JWT authenticates the sender, not the body (it carries no digest of it): the body is not signed. The challenge echo needs no secret and is answered as is.",
		SignatureHeaders: []string{"Authorization"},
		Handshake:        "POST {\"challenge\"} → the same JSON",
		DeliveryID:       oneOf(fromJSON("event.triggerUuid")),
		Event:            oneOf(fromJSON("event.type")),
		Template:         "monday.com {{event}}: {{payload.event.pulseName}} on board {{payload.event.boardId}}",
		Tolerance:        time.Minute,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		build: withHandshake(jwtProvider(jwtSpec{header: "Authorization"}, nil), handshakeSpec{
			detect: func(c *call) bool {
				return isPost(c) && jsonValue(c.json(), "challenge") != nil && jsonValue(c.json(), "event") == nil
			},
			auth:   hsNone,
			answer: echoJSON("monday challenge", "challenge", "challenge"),
		}),
	})
}
