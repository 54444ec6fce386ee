package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "notion",
		Title:            "Notion",
		Family:           FamilyHMAC,
		Signature:        "X-Notion-Signature: sha256=<hex HMAC-SHA256(body)> under the verification token",
		Doc:              "https://developers.notion.com/reference/webhooks#step-3-validating-event-payloads-recommended",
		Notes:            "Notion hands the key over once: its first POST carries {\"verification_token\"}. With secret_file the edge keeps it there (written once, 0600): read it, paste it in Notion's Verify dialog. Or give it as secret. Notion signs no time.",
		SignatureHeaders: []string{"X-Notion-Signature"},
		Handshake:        "POST {\"verification_token\"} → 200, the token kept in secret_file (first one wins) or compared with secret",
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Notion {{event}}: {{payload.entity.type}} {{payload.entity.id}} by {{payload.authors.0.id}}",
		Words:            []string{"secret", "secret_file"},
		SignsBody:        true,
		build: withHandshake(capturedProvider(macSpec{
			headers: []string{"X-Notion-Signature"}, prefix: "sha256=", enc: encHex, parts: []part{bodyPart()},
		}), handshakeSpec{
			detect: func(c *call) bool {
				return isPost(c) && len(c.header().Values("X-Notion-Signature")) == 0 && jsonValue(c.json(), "verification_token") != nil
			},
			auth: hsAnswer,
			answer: func(c *call, s scheme) (*Answer, error) {
				if !capturedOf(s).capture(jsonField(c.json(), "verification_token")) {
					return nil, fail(ReasonBadHandshake, "")
				}
				return emptyAnswer("notion verification token", http.StatusOK), nil
			},
		}),
	})
}
