package spool

import "time"

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

// ReasonExpired is the dead-letter reason of an event older than max_age.
const ReasonExpired = reasonExpired

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
