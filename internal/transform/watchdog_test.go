package transform

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// TestWatchdogCountsCPUTime (issue 34 N9r): a call's time budget counts
// the CPU time of its thread, so a call that waits (as one does on a CPU
// a flood or a busy machine starves: here it sleeps) for several budgets
// is not stopped, while one that computes is stopped once it used its
// budget of CPU time; a call that waits beyond wallFactor budgets is
// stopped whatever its CPU time. Before: the budget was wall-clock time,
// and 12 of 527 legitimate calls beside a flood of large bodies failed
// with "exceeded the time budget" (TestTransformFalseFailuresUnderFlood).
func TestWatchdogCountsCPUTime(t *testing.T) {
	if _, ok := threadCPUClock(); !ok {
		t.Skip("no thread CPU clock here: the budget is wall-clock time")
	}
	const budget = 100 * time.Millisecond
	w := newWatchdog()
	run := func(work func(c *call)) *call {
		c := &call{rt: goja.New(), ctx: context.Background(), budget: 1 << 40}
		c.setBudget(time.Now(), budget)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			w.add(c)
			defer w.remove(c)
			c.setCPUClock(threadCPUClock())
			work(c)
		}()
		<-done
		return c
	}
	// waits 3 budgets, then computes for less than one
	waiting := run(func(c *call) {
		time.Sleep(3 * budget)
		spin(budget / 4)
	})
	if r := waiting.reason.Load(); r != reasonNone {
		t.Fatalf("a call that waited 3 budgets and computed a quarter of one was stopped (reason %d)", r)
	}
	// computes until stopped (at most 10 s)
	computing := run(func(c *call) {
		for end := time.Now().Add(10 * time.Second); c.reason.Load() == reasonNone && time.Now().Before(end); {
			spin(time.Millisecond)
		}
	})
	if r := computing.reason.Load(); r != reasonTimeout {
		t.Fatalf("a call computing for 10 s: reason %d, want the time budget (%d)", r, reasonTimeout)
	}
	// waits past the wall-clock limit
	if budget*wallFactor > 2*time.Second {
		t.Fatal("the wall-clock limit is too long for this test")
	}
	stuck := run(func(c *call) {
		for end := time.Now().Add(10 * time.Second); c.reason.Load() == reasonNone && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	})
	if r := stuck.reason.Load(); r != reasonTimeout {
		t.Fatalf("a call waiting for 10 s: reason %d, want the time budget (%d)", r, reasonTimeout)
	}
}

// spin uses the CPU for d of wall-clock time.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
