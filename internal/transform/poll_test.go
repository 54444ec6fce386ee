package transform

import (
	"testing"
	"time"
)

// hangBound is the "did not hang" bound of the tests that check that a
// limit stopped a call: far above every budget they configure, so only a
// call the limit failed to stop reaches it, however loaded the machine.
// How soon a limit stops a call is measured by the benchmarks.
const hangBound = 10 * time.Second

// waitUntil polls cond until it holds, failing the test after two
// minutes (a call stuck in a backtracking regular expression on purpose
// takes its time on a loaded machine, and longer under the race detector).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(wait)
	}
}
