package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "slack",
		Title:            "Slack",
		Family:           FamilyHMAC,
		Signature:        "X-Slack-Signature: v0=<hex HMAC-SHA256(v0:timestamp:body)>, X-Slack-Request-Timestamp",
		Doc:              "https://api.slack.com/authentication/verifying-requests-from-slack",
		Notes:            "The Events API posts JSON; slash commands and interactivity post forms (interactivity's payload= field is JSON, embedded as such). Use the app's Signing Secret, not a bot token. Slack wants 200 within 3 s: the edge answers 200 with an empty body once accepted.",
		Body:             BodyJSONOrForm,
		FormJSONFields:   []string{"payload"},
		SignatureHeaders: []string{"X-Slack-Signature"},
		Handshake:        "url_verification (signed) → {\"challenge\"}",
		DeliveryID:       oneOf(fromJSON("event_id"), fromJSON("trigger_id"), fromJSON("payload.trigger_id")),
		Event:            oneOf(fromJSON("event.type"), fromJSON("command"), fromJSON("payload.type")),
		Template:         "Slack {{event}} from {{payload.event.user}}{{payload.user_name}}{{payload.payload.user.username}}: {{payload.event.text}}{{payload.text}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		Ack:              emptyAnswer("slack acknowledgement", http.StatusOK),
		build: withHandshake(macProvider(macSpec{
			headers: []string{"X-Slack-Signature"}, prefix: "v0=", enc: encHex,
			parts:    []part{lit("v0:"), tsPart(), lit(":"), bodyPart()},
			tsFrom:   tsHeader,
			tsHeader: "X-Slack-Request-Timestamp",
		}), handshakeSpec{
			detect: jsonIs("url_verification", "type"),
			auth:   hsSigned,
			answer: echoJSON("slack url_verification", "challenge", "challenge"),
		}),
		finish: func(c *call, r Result) (Result, error) {
			// a caller that does not call Handshake still sees the challenge
			if jsonField(c.json(), "type") != "url_verification" {
				return r, nil
			}
			ch := jsonField(c.json(), "challenge")
			if cleanID(ch) == "" {
				return Result{}, fail(ReasonBadChallenge, "")
			}
			return Result{Challenge: ch}, nil
		},
	})
}
