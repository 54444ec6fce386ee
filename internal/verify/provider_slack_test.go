package verify

import "time"

// slackDocsBody is the slash command of Slack's verification example.
const slackDocsBody = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"

const (
	slackEventBody    = `{"type":"event_callback","event_id":"Ev0TEST","event":{"type":"app_mention","user":"U1","text":"hi there"}}`
	slackInteractBody = "payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22t1%22%2C%22user%22%3A%7B%22username%22%3A%22ann%22%7D%7D"
	slackChallenge    = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	formCT            = "application/x-www-form-urlencoded"
)

// slackSigned is a POST signed the Slack way with secret at ts.
func slackSigned(secret, ts, body string, kv ...string) func() *Request {
	return post(body, append([]string{"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slackSig(secret, ts, body)}, kv...)...)
}

var _ = providerTest("slack", providerTests{
	vectors: []vector{{
		name:   "docs example (slash command form)",
		source: "vector from https://api.slack.com/authentication/verifying-requests-from-slack#a_recipe_for_security",
		cfg:    Config{Scheme: "slack", Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}},
		req: post(slackDocsBody, "Content-Type", formCT, "X-Slack-Request-Timestamp", "1531420618",
			"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
		now:  time.Unix(1531420618+30, 0),
		want: Result{DeliveryID: "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", Event: "/webhook-collect"},
	}, {
		name:   "events API",
		source: "computed from https://api.slack.com/authentication/verifying-requests-from-slack: v0= hex HMAC-SHA256 of v0:timestamp:body",
		cfg:    Config{Scheme: "slack", Secrets: []string{slackSecret}},
		req:    slackSigned(slackSecret, ts(0), slackEventBody, "Content-Type", "application/json"),
		now:    testNow,
		want:   Result{DeliveryID: "Ev0TEST", Event: "app_mention"},
	}, {
		name:   "interactivity form with a JSON payload field",
		source: "computed from https://api.slack.com/interactivity/handling#payloads: the payload form field is JSON, signed like any request",
		cfg:    Config{Scheme: "slack", Secrets: []string{slackSecret}},
		req:    slackSigned(slackSecret, ts(0), slackInteractBody, "Content-Type", formCT),
		now:    testNow,
		want: Result{DeliveryID: "t1", Event: "block_actions",
			Payload: []byte(`{"payload":{"type":"block_actions","trigger_id":"t1","user":{"username":"ann"}}}`)},
	}},
	handshakes: []handshakeCase{{
		name:   "url_verification",
		source: "computed from https://api.slack.com/events/url_verification: a signed POST, answered with its challenge",
		cfg:    &Config{Scheme: "slack", Secrets: []string{slackSecret}},
		req:    slackSigned(slackSecret, ts(0), slackChallenge, "Content-Type", "application/json"),
		now:    testNow,
		status: 200, ctype: "application/json",
		body: `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`,
	}, {
		name:     "url_verification signed with another secret",
		cfg:      &Config{Scheme: "slack", Secrets: []string{slackSecret}},
		req:      slackSigned(otherSecret, ts(0), slackChallenge),
		now:      testNow,
		wantFail: ReasonBadSignature,
	}},
})
