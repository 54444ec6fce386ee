package cluster

import "time"

// Sealing proves who wrote a record, not that it is fresh: a client of
// the servers can record a sealed record and write it back (or publish
// it again) later. Every sealed record therefore also carries freshness,
// checked by its readers, and a replay is dropped and counted
// (caddy_hooks_cluster_replays_total{kind}):
//
//   - a bucket value (a lock, an idempotency record, the wake lane's
//     lease) carries the time its writer wrote it, which must be within
//     FreshWindow of the engine's own time of the write;
//   - a batch of failures, an announcement and an outcome message are
//     numbered per sender (a random id per run), so a repeated one is
//     dropped, and carry times that must fall within a window of now, so
//     a sender that went quiet (and was forgotten) cannot be replayed.

// FreshWindow is how long after the time its writer stamped on it a
// bucket value may be stored by the engine and still be fresh: the
// writers' clock skew, one operation's timeout (the write may take that
// long) and a second of slack.
func FreshWindow(skew, timeout time.Duration) time.Duration { return skew + timeout + time.Second }

// Fresh reports whether a bucket value stamped written by its writer was
// stored by the engine at stored within FreshWindow: a value written back
// later (a replay of a recorded one) is not.
func Fresh(written, stored time.Time, skew, timeout time.Duration) bool {
	return !stored.After(written.Add(FreshWindow(skew, timeout)))
}

// Kinds of records counted by Replayed.
const (
	ReplayedFailures    = "failures"
	ReplayedLock        = "lock"
	ReplayedIdempotency = "idempotency"
	ReplayedLease       = "lease"
	ReplayedOutcome     = "outcome"
)
