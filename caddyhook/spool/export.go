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
