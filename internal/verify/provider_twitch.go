package verify

import "time"

// Twitch EventSub headers.
const (
	twitchType = "Twitch-Eventsub-Message-Type"
	twitchID   = "Twitch-Eventsub-Message-Id"
	twitchTS   = "Twitch-Eventsub-Message-Timestamp"
)

func init() {
	register(&Provider{
		Name:             "twitch",
		Title:            "Twitch EventSub",
		Family:           FamilyHMAC,
		Signature:        "Twitch-Eventsub-Message-Signature: sha256=<hex HMAC-SHA256(message id + timestamp + body)>",
		Doc:              "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
		Notes:            "The secret is the one given when the subscription was created. A revocation is verified and dispatched as the event \"revocation\" (the agent learns the subscription ended). Twitch allows 10 minutes.",
		SignatureHeaders: []string{"Twitch-Eventsub-Message-Signature"},
		Handshake:        "webhook_callback_verification (signed) → the challenge (text/plain)",
		DeliveryID:       oneOf(fromHeader(twitchID)),
		Event: oneOf(fromFunc("header Twitch-Eventsub-Subscription-Type (revocation for revocations)", func(c *call) string {
			if t, _ := headerValue(c.header(), twitchType); t == "revocation" {
				return "revocation"
			}
			t, _ := headerValue(c.header(), "Twitch-Eventsub-Subscription-Type")
			return t
		})),
		Template:  "Twitch {{event}}: {{payload.event.broadcaster_user_name}} {{payload.event.user_name}} {{payload.subscription.status}}",
		Tolerance: 10 * time.Minute,
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build: withHandshake(macProvider(macSpec{
			headers: []string{"Twitch-Eventsub-Message-Signature"}, prefix: "sha256=", enc: encHex,
			parts:  []part{headerPart(twitchID, ReasonMissingID), tsPart(), bodyPart()},
			tsFrom: tsHeader, tsHeader: twitchTS, tsUnit: unitRFC3339,
		}), handshakeSpec{
			detect: func(c *call) bool {
				t, _ := headerValue(c.header(), twitchType)
				return isPost(c) && t == "webhook_callback_verification"
			},
			auth: hsSigned,
			answer: func(c *call, _ scheme) (*Answer, error) {
				ch := cleanChallenge(jsonField(c.json(), "challenge"))
				if ch == "" {
					return nil, fail(ReasonBadChallenge, "")
				}
				return textAnswer("twitch webhook_callback_verification", ch), nil
			},
		}),
	})
}
