package verify

import (
	"net/http"
	"time"
)

// Slack headers (canonical forms) and signature details.
const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackPrefix          = "v0="
)

// slackBase starts Slack's signed content "v0:<timestamp>:<body>".
var slackBase, colon = []byte("v0:"), []byte{':'}

// slackScheme checks X-Slack-Signature: v0=<hex HMAC-SHA256 of
// "v0:<X-Slack-Request-Timestamp>:<body>">. A signed url_verification
// request yields Result.Challenge; other events yield their event_id as
// the delivery id, so X-Slack-Retry-* retries of one event deduplicate.
type slackScheme struct{ tol time.Duration }

// newSlack validates cfg for the slack scheme.
func newSlack(cfg Config) (slackScheme, error) {
	tol, err := schemeTolerance(cfg)
	if err != nil {
		return slackScheme{}, err
	}
	return slackScheme{tol: tol}, rejectGenericFields(cfg)
}

// verify implements scheme.
func (s slackScheme) verify(m *macSet, h http.Header, body []byte, now time.Time) (Result, error) {
	sig, err := requireHeader(h, slackSignatureHeader, ReasonMissingSignature)
	if err != nil {
		return Result{}, err
	}
	ts, err := requireHeader(h, slackTimestampHeader, ReasonMissingTimestamp)
	if err != nil {
		return Result{}, err
	}
	var c candidates
	if r := parsePrefixed(sig, slackPrefix, encHex, m.size, &c); r != "" {
		return Result{}, fail(r, slackSignatureHeader)
	}
	if err := checkTimestamp(ts, slackTimestampHeader, now, s.tol); err != nil {
		return Result{}, err
	}
	if !m.match(&c, slackBase, []byte(ts), colon, body) {
		return Result{}, fail(ReasonBadSignature, slackSignatureHeader)
	}
	return slackResult(body)
}

// slackResult reads the verified body: the challenge of a url_verification
// request, else the event_id.
func slackResult(body []byte) (Result, error) {
	f := readBodyFields(body)
	if f.Type != "url_verification" {
		return Result{DeliveryID: cleanID(f.EventID)}, nil
	}
	if cleanID(f.Challenge) == "" {
		return Result{}, fail(ReasonBadChallenge, "")
	}
	return Result{Challenge: f.Challenge}, nil
}
