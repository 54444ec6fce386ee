package caddyhook

import (
	"strings"
	"testing"
	"time"
)

// pollTimeout bounds the waits of the tests for something that happens
// asynchronously (a delivery, a log line, a goroutine reaching a point).
// It is generous on purpose: a condition that holds returns at once, and
// only a broken one waits this long, on any machine however loaded.
const pollTimeout = 30 * time.Second

// hangBound is the "did not hang" bound of the tests that check that
// something (a transform budget, a gateway timeout, a lock wait) stopped a
// call: far above the configured limits, so that only a call the limit
// failed to stop can reach it, however loaded the machine.
const hangBound = 10 * time.Second

// eventually calls cond until it returns true or timeout has passed, and
// reports whether it did. The pause between calls grows from 1ms to 50ms.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// waitFor fails the test when cond does not hold within pollTimeout; what
// describes the condition (and its state) for the failure message.
func waitFor(tb testing.TB, what func() string, cond func() bool) {
	tb.Helper()
	if !eventually(pollTimeout, cond) {
		tb.Fatalf("still not the case after %v: %s", pollTimeout, what())
	}
}

// waitLogs waits until the Caddy log holds every one of want and returns
// it. Lines are written as requests finish, not necessarily before the
// client has its answer.
func (in *ingress) waitLogs(want ...string) string {
	in.t.Helper()
	var logs string
	ok := eventually(pollTimeout, func() bool {
		logs = in.logs()
		for _, w := range want {
			if !strings.Contains(logs, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		in.t.Fatalf("the log lacks one of %q after %v:\n%s", want, pollTimeout, logs)
	}
	return logs
}
