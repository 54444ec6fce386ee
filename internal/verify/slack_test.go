package verify

import (
	"strings"
	"testing"
	"time"
)

// slackSig is the X-Slack-Signature value for timestamp and body.
func slackSig(secret, timestamp, body string) string {
	return "v0=" + hexSHA256(secret, "v0:", timestamp, ":", body)
}

func TestSlack(t *testing.T) {
	event := `{"token":"x","team_id":"T1","type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`
	challenge := `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	now := ts(0)
	good := slackSig(slackSecret, now, event)
	v := mustNew(t, Config{Scheme: SchemeSlack, Secrets: []string{slackSecret}})
	signed := func(body string, extra ...string) reqCase {
		return reqCase{h: hdr(append([]string{"X-Slack-Signature", slackSig(slackSecret, now, body), "X-Slack-Request-Timestamp", now}, extra...)...), body: body}
	}
	with := func(rc reqCase, name string, want Result, reason string) reqCase {
		rc.name, rc.want, rc.wantReason = name, want, reason
		return rc
	}
	runCases(t, v, []reqCase{
		{name: "event", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", now), body: event, want: Result{DeliveryID: "Ev08MFMKH6"}},
		with(signed(event, "X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout"), "retry keeps the event id", Result{DeliveryID: "Ev08MFMKH6"}, ""),
		with(signed(challenge), "url_verification", Result{Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}, ""),
		with(signed(`{"type":"url_verification"}`), "url_verification without challenge", Result{}, ReasonBadChallenge),
		with(signed(`{"type":"url_verification","challenge":"a b"}`), "url_verification with odd challenge", Result{}, ReasonBadChallenge),
		with(signed(`{"type":"url_verification","challenge":"`+strings.Repeat("c", MaxDeliveryIDLen+1)+`"}`), "url_verification with huge challenge", Result{}, ReasonBadChallenge),
		with(signed(`{"type":"URL_verification","challenge":"abc"}`), "type compared exactly", Result{}, ""),
		with(signed("payload=%7B%7D"), "form body", Result{}, ""),
		{name: "unsigned url_verification", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", now), body: challenge, wantReason: ReasonBadSignature},
		{name: "missing signature", h: hdr("X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonMissingSignature, wantHeader: "X-Slack-Signature"},
		{name: "missing timestamp", h: hdr("X-Slack-Signature", good), body: event, wantReason: ReasonMissingTimestamp, wantHeader: "X-Slack-Request-Timestamp"},
		{name: "stale", h: hdr("X-Slack-Signature", slackSig(slackSecret, ts(-301*time.Second), event), "X-Slack-Request-Timestamp", ts(-301*time.Second)), body: event, wantReason: ReasonStaleTimestamp},
		{name: "future", h: hdr("X-Slack-Signature", slackSig(slackSecret, ts(301*time.Second), event), "X-Slack-Request-Timestamp", ts(301*time.Second)), body: event, wantReason: ReasonStaleTimestamp},
		{name: "edge of tolerance", h: hdr("X-Slack-Signature", slackSig(slackSecret, ts(-300*time.Second), event), "X-Slack-Request-Timestamp", ts(-300*time.Second)), body: event, want: Result{DeliveryID: "Ev08MFMKH6"}},
		{name: "timestamp header changed", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", ts(time.Second)), body: event, wantReason: ReasonBadSignature},
		{name: "malformed timestamp", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", "1.7e9"), body: event, wantReason: ReasonMalformedTimestamp},
		{name: "conflicting timestamps", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", now, "X-Slack-Request-Timestamp", ts(time.Second)), body: event, wantReason: ReasonDuplicateHeader, wantHeader: "X-Slack-Request-Timestamp"},
		{name: "wrong secret", h: hdr("X-Slack-Signature", slackSig(otherSecret, now, event), "X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonBadSignature},
		{name: "tampered body", h: hdr("X-Slack-Signature", good, "X-Slack-Request-Timestamp", now), body: strings.Replace(event, "T1", "T2", 1), wantReason: ReasonBadSignature},
		{name: "one hex digit off", h: hdr("X-Slack-Signature", flipHex(good), "X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonBadSignature},
		{name: "github-style content", h: hdr("X-Slack-Signature", "v0="+hexSHA256(slackSecret, event), "X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonBadSignature},
		{name: "wrong version prefix", h: hdr("X-Slack-Signature", "v1="+good[3:], "X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonMalformedSignature},
		{name: "not hex", h: hdr("X-Slack-Signature", "v0="+strings.Repeat("x", 64), "X-Slack-Request-Timestamp", now), body: event, wantReason: ReasonMalformedSignature},
	})
}
