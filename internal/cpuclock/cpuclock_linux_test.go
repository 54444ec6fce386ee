package cpuclock

import (
	"runtime"
	"testing"
	"time"
)

// TestThreadClockCountsWorkNotWaiting: a thread's clock advances while it
// works and stands still while it sleeps, and another goroutine reads it.
func TestThreadClockCountsWorkNotWaiting(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock, ok := Thread()
	if !ok {
		t.Fatal("no thread clock on Linux")
	}
	read := func() time.Duration {
		got := make(chan time.Duration, 1)
		go func() { d, _ := Read(clock); got <- d }() // from another thread
		return <-got
	}
	before := read()
	for start, _ := Read(clock); ; {
		if now, _ := Read(clock); now-start >= 20*time.Millisecond {
			break
		}
	}
	worked := read()
	if worked-before < 20*time.Millisecond {
		t.Fatalf("20ms of work counted %s", worked-before)
	}
	time.Sleep(50 * time.Millisecond) // the thread waits, locked
	if slept := read() - worked; slept >= 50*time.Millisecond {
		t.Fatalf("a 50ms sleep counted %s of CPU time", slept)
	}
	if p, ok := Read(Process); !ok || p < worked-before {
		t.Fatalf("process clock %s %v, below this thread's work", p, ok)
	}
}
