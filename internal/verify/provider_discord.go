package verify

import "net/http"

// discordKinds names Discord interaction types.
var discordKinds = map[string]string{"1": "PING", "2": "APPLICATION_COMMAND", "3": "MESSAGE_COMPONENT", "4": "APPLICATION_COMMAND_AUTOCOMPLETE", "5": "MODAL_SUBMIT"}

func init() {
	register(&Provider{
		Name:             "discord",
		Title:            "Discord (interactions and webhook events)",
		Family:           FamilyEd25519,
		Signature:        "X-Signature-Ed25519: <hex Ed25519(timestamp + body)>, X-Signature-Timestamp",
		Doc:              "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers",
		Notes:            "public_key is the application's Public Key (hex). Discord checks the endpoint with bad signatures too: they are refused (401). An accepted interaction is answered with a deferred response (type 5; 6 for components), so the agent follows up through the interaction token; webhook events are answered 204.",
		SignatureHeaders: []string{"X-Signature-Ed25519"},
		Handshake:        "PING (type 1, signed) → {\"type\":1}; webhook events PING (type 0, signed) → 204",
		DeliveryID:       oneOf(fromJSON("id"), fromBodyHash()),
		Event: oneOf(fromJSON("data.name"), fromJSON("event.type"), fromFunc("interaction type name", func(c *call) string {
			return discordKinds[jsonField(c.json(), "type")]
		})),
		Template:  "Discord {{event}} from {{payload.member.user.username}}{{payload.user.username}}: {{payload.data.options.0.value}}",
		Tolerance: DefaultTolerance,
		Words:     []string{"public_key"},
		Required:  []string{"public_key"},
		SignsBody: true,
		ack: func(c *call) *Answer {
			if jsonValue(c.json(), "event") != nil {
				return emptyAnswer("discord event acknowledgement", http.StatusNoContent)
			}
			switch jsonField(c.json(), "type") {
			case "3":
				return rawJSONAnswer("discord deferred update", http.StatusOK, []byte(`{"type":6}`))
			case "4":
				return rawJSONAnswer("discord empty autocomplete", http.StatusOK, []byte(`{"type":8,"data":{"choices":[]}}`))
			}
			return rawJSONAnswer("discord deferred response", http.StatusOK, []byte(`{"type":5}`))
		},
		build: withHandshake(ed25519Provider(pubSpec{
			sigHeader: "X-Signature-Ed25519", tsHeader: "X-Signature-Timestamp", enc: encHex,
		}), handshakeSpec{
			detect: func(c *call) bool {
				if !isPost(c) {
					return false
				}
				t := jsonField(c.json(), "type")
				return (t == "1" && jsonValue(c.json(), "event") == nil) || t == "0"
			},
			auth: hsSigned,
			answer: func(c *call, _ scheme) (*Answer, error) {
				if jsonField(c.json(), "type") == "0" {
					return emptyAnswer("discord webhook events ping", http.StatusNoContent), nil
				}
				return rawJSONAnswer("discord ping", http.StatusOK, []byte(`{"type":1}`)), nil
			},
		}),
	})
}
