package tmpl

import (
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/cpuclock"
)

// TestCELTimeBoundCountsCPUTime: an evaluation's time bound is spent by
// the CPU time of its thread, not by time it waits for a CPU (on a busy
// machine a match well within its cost limit was refused, 400 "hook
// mapping failed", after 1 s of wall-clock time), and it still ends work
// that uses it up. Here the thread waits three bounds, then works.
func TestCELTimeBoundCountsCPUTime(t *testing.T) {
	const budget = 100 * time.Millisecond
	start := time.Now()
	ctx, done := evalContext(budget) // locks this goroutine to its thread
	defer done()
	clock, _ := cpuclock.Thread()
	cpu0, ok := cpuclock.Read(clock)
	if !ok {
		t.Fatal("no thread CPU clock on Linux")
	}
	time.Sleep(3 * budget) // waiting, as for a busy CPU
	if ctx.Err() != nil && time.Since(start) < wallFactor*budget {
		t.Fatalf("the bound ended after %s of waiting (wall-clock limit %s)", time.Since(start).Round(time.Millisecond), wallFactor*budget)
	}
	for ctx.Err() == nil {
		if time.Since(start) > time.Minute {
			t.Fatal("the bound did not end a minute of work")
		}
	}
	used, _ := cpuclock.Read(clock)
	if used-cpu0 < budget && time.Since(start) < wallFactor*budget {
		t.Fatalf("ended after %s of CPU time and %s in all, before its bound %s", used-cpu0, time.Since(start), budget)
	}
}
