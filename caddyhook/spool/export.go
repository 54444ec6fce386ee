package spool

import (
	"fmt"
	"strings"
	"time"
)

// Outcome is what a delivery attempt's result means for the event, as the
// store decides it; other queues (the cluster spool) apply the same rules.
type Outcome int

// Outcomes of Classify.
const (
	OutcomeRetry Outcome = Outcome(outcomeRetry) // network error, 0, 408, 425, 429, 5xx: try again later
	OutcomeDone  Outcome = Outcome(outcomeDone)  // 2xx: delivered
	OutcomeDead  Outcome = Outcome(outcomeDead)  // any other status: dead letter with the reason
)

// Classify maps a Sender result to an Outcome (see Sender).
func Classify(status int, err error) Outcome { return Outcome(classify(status, err)) }

// Backoff is the delay before retry number attempts (1 = first retry):
// min(maxDelay, initial·2^(attempts-1)) with ±20 % jitter.
func Backoff(initial, maxDelay time.Duration, attempts int) time.Duration {
	return backoff(initial, maxDelay, attempts, jitter)
}

// Clip bounds a failure reason as the store does before storing it: one
// line of valid UTF-8, at most 256 bytes.
func Clip(reason string) string { return clip(reason) }

// ReasonExpired is the dead-letter reason of an event older than max_age
// that was never attempted (see ExpiredReason).
const ReasonExpired = reasonExpired

// ExpiredReason is the dead-letter reason of an event that expired past
// max_age after attempts failed attempts, the last of which failed with
// last: the cause stays with it ("expired after 10 attempts; last:
// gateway status 502: bad gateway"). Clipped as a stored reason.
func ExpiredReason(attempts int, last string) string {
	switch {
	case attempts <= 0:
		return reasonExpired
	case last == "" && attempts == 1:
		return "expired after 1 attempt"
	case last == "":
		return fmt.Sprintf("expired after %d attempts", attempts)
	case attempts == 1:
		return clip("expired after 1 attempt; last: " + last)
	}
	return clip(fmt.Sprintf("expired after %d attempts; last: %s", attempts, last))
}

// IsExpired reports whether a dead letter's reason says it expired.
func IsExpired(reason string) bool { return strings.HasPrefix(reason, "expired") }

// MarshalEvent encodes ev in the record format of spool.db: every field a
// delivery needs (id, kind, path with its query, headers, trace context,
// client address, first-seen time, body), so that another store of events
// (the cluster queue) carries exactly what the local spool stores. Seq is
// not encoded.
func MarshalEvent(ev *Event) []byte { return encodeEvent(ev) }

// UnmarshalEvent decodes a MarshalEvent record into a new Event and checks
// that it has what a delivery needs (ErrInvalidEvent otherwise).
func UnmarshalEvent(b []byte) (*Event, error) {
	ev, err := decodeEvent(b)
	if err != nil {
		return nil, err
	}
	if err := ev.validate(); err != nil {
		return nil, err
	}
	return ev, nil
}
