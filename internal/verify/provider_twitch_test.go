package verify

import "time"

const (
	twitchSecret       = "twitch-eventsub-secret-0123"
	twitchNotification = `{"subscription":{"id":"f1c2a387","type":"channel.follow","status":"enabled"},"event":{"user_name":"cool_user","broadcaster_user_name":"cooler_user"}}`
	twitchVerification = `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387","type":"channel.follow","status":"webhook_callback_verification_pending"}}`
	twitchRevocation   = `{"subscription":{"id":"f1c2a387","type":"channel.follow","status":"authorization_revoked"}}`
)

var twitchNow = testNow.UTC().Format(time.RFC3339Nano)

// twitchSigned is a POST signed the Twitch way.
func twitchSigned(secret, typ, id, body string) func() *Request {
	return post(body, twitchType, typ, twitchID, id, twitchTS, twitchNow,
		"Twitch-Eventsub-Subscription-Type", "channel.follow",
		"Twitch-Eventsub-Message-Signature", "sha256="+hexMAC(sha256H, secret, id, twitchNow, body))
}

var _ = providerTest("twitch", providerTests{
	vectors: []vector{{
		name:   "notification",
		source: "computed from https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message: sha256= hex HMAC-SHA256 of message id, timestamp and body",
		cfg:    Config{Scheme: "twitch", Secrets: []string{twitchSecret}},
		req:    twitchSigned(twitchSecret, "notification", "befa7b53-d79d-478f-86b9-120f112b044e", twitchNotification),
		now:    testNow,
		want:   Result{DeliveryID: "befa7b53-d79d-478f-86b9-120f112b044e", Event: "channel.follow"},
	}, {
		name:   "revocation",
		source: "computed from https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#revoking-your-subscription: signed like a notification",
		cfg:    Config{Scheme: "twitch", Secrets: []string{twitchSecret}},
		req:    twitchSigned(twitchSecret, "revocation", "84c1e79a-2a4b-4c13-ba0b-4312293e9308", twitchRevocation),
		now:    testNow,
		want:   Result{DeliveryID: "84c1e79a-2a4b-4c13-ba0b-4312293e9308", Event: "revocation"},
	}},
	handshakes: []handshakeCase{{
		name:   "webhook_callback_verification",
		source: "computed from https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#responding-to-a-challenge-request: answer the challenge as text",
		req:    twitchSigned(twitchSecret, "webhook_callback_verification", "e76c6bd4", twitchVerification),
		status: 200, body: "pogchamp-kappa-360noscope-vohiyo", ctype: "text/plain",
	}, {
		name:     "verification signed with another secret",
		req:      twitchSigned(otherSecret, "webhook_callback_verification", "e76c6bd4", twitchVerification),
		wantFail: ReasonBadSignature,
	}},
})
