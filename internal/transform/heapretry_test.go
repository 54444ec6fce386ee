package transform

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// allocSink keeps the test's garbage allocations from being optimised
// away; only allocateUntil writes it.
var allocSink []byte

// allocateUntil allocates garbage in 1 MiB pieces, as the rest of a busy
// process would, until stop is closed.
func allocateUntil(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
			allocSink = make([]byte, 1<<20)
		}
	}
}

// pollOnWorker waits (on a worker, where t.Fatal is not allowed) until
// cond holds, for at most two minutes.
func pollOnWorker(what string, cond func() bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stoppedCall waits (on the worker) until the watchdog has stopped v's
// call.
func stoppedCall(v *vm) error {
	return pollOnWorker("the heap check to stop the call", func() bool { return v.guard.call.reason.Load() != reasonNone })
}

// TestHeapStopFromElsewhereIsRetried reproduces issue 20 item 6: a call
// that allocates nothing is stopped by the heap check because another part
// of the process allocates without end meanwhile (a flood of large request
// bodies does): past the budget before the fix, past rawFactor budgets
// now, whatever the call's share. The call is tried again on a fresh
// runtime, where it succeeds. Before the fix, the caller got "memory
// limit".
func TestHeapStopFromElsewhereIsRetried(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => ({ ok: true });`, "", Options{Timeout: hangBound, MaxBytes: 1 << 20})
	var attempts atomic.Int32
	out, err := p.supervise(context.Background(), nil, func(v *vm) (map[string]any, error) {
		if attempts.Add(1) == 1 {
			stop := make(chan struct{})
			go allocateUntil(stop)
			err := stoppedCall(v)
			close(stop)
			if err != nil {
				return nil, err
			}
		}
		return map[string]any{"ok": true}, nil
	})
	if err != nil || out["ok"] != true {
		t.Fatalf("call beside another part of the process allocating = %v, %v; want it to succeed when tried again", out, err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// TestHeapStopRetriedAtMostTwice: a call stopped every time although its
// own share stayed within its budget is tried three times in all, and the
// caller gets "memory limit"; a call charged with its budget (a heap bomb,
// where the share can be read), a guard refusal (which would repeat) and
// a timeout are not tried again.
func TestHeapStopRetriedAtMostTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	bombAttempts, bombDetail := int32(1), "heap grew"
	if runtime.GOOS != "linux" {
		bombAttempts, bombDetail = 1+heapRetries, "in each of 3 attempts" // no share to charge
	}
	tests := []struct {
		name, src string
		uncharged bool // the job stops its call as the heap check does when others allocated
		kind      string
		attempts  int32
		detail    string
	}{
		{"stopped, not charged", `export default () => ({});`, true, KindMemory, 1 + heapRetries, "in each of 3 attempts"},
		{"heap bomb", `export default () => { const a = []; for (;;) a.push({ s: "x" + a.length }); };`, false, KindMemory, bombAttempts, bombDetail},
		{"guard refusal", `export default () => { try { "x".repeat(1e9); } catch (e) {} return {}; };`, false, KindMemory, 1, "String.prototype.repeat"},
		{"timeout", `export default () => { for (;;); };`, false, KindTimeout, 1, "time budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			timeout := hangBound
			if tc.kind == KindTimeout {
				timeout = 100 * time.Millisecond
			}
			p := compileSource(t, "m.js", tc.src, "", Options{Timeout: timeout, MaxBytes: 1 << 20})
			var attempts atomic.Int32
			_, err := p.supervise(context.Background(), nil, func(v *vm) (map[string]any, error) {
				attempts.Add(1)
				if tc.uncharged {
					v.guard.call.uncharged = true
					v.guard.call.stop(reasonMemory)
				}
				return v.invoke(Input{}, p.opts.MaxBytes)
			})
			var e *Error
			if !errors.As(err, &e) || e.Kind != tc.kind || !strings.Contains(e.Message, tc.detail) {
				t.Fatalf("error %v, want %s containing %q", err, tc.kind, tc.detail)
			}
			if n := attempts.Load(); n != tc.attempts {
				t.Fatalf("%d attempts, want %d", n, tc.attempts)
			}
		})
	}
}

// TestRunEachResumesAfterHeapStop: a RunEach element stopped by the heap
// check without being charged (as others' allocations would make it) is
// tried again,
// and the retry resumes at that element: every element has its one
// result, in order.
func TestRunEachResumesAfterHeapStop(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => ({ message: "item " + ctx.payload.items[0] });`, "", Options{Timeout: hangBound})
	items := []any{"a", "b", "c", "d"}
	var calls []int
	results, err := p.runEach(context.Background(), Input{Payload: map[string]any{"items": items}}, "items", items, func(v *vm, i int) {
		calls = append(calls, i)
		if len(calls) == 3 { // the first attempt at "c", stopped as others' allocations would
			v.guard.call.uncharged = true
			v.guard.call.stop(reasonMemory)
		}
	})
	if err != nil || len(results) != len(items) {
		t.Fatalf("RunEach = %v, %v", results, err)
	}
	for i, r := range results {
		if r["message"] != fmt.Sprintf("item %s", items[i]) {
			t.Fatalf("result %d = %v", i, r)
		}
	}
	if fmt.Sprint(calls) != "[0 1 2 2 3]" {
		t.Fatalf("elements called %v, want [0 1 2 2 3]", calls)
	}
}

// TestHeapCheckChargesByCPUShare: while a call idles, another part of the
// process allocates three times the call's budget; the call, which used
// next to none of the CPU meanwhile, is charged with next to none of it
// and is not stopped (before, the whole process's growth was charged).
func TestHeapCheckChargesByCPUShare(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread CPU clocks are read on Linux only")
	}
	p := compileSource(t, "m.js", `export default () => ({ ok: true });`, "", Options{Timeout: hangBound, MaxBytes: 1 << 20})
	w := p.watch
	samples := func() uint64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.samples
	}
	// waitSamples waits (on the worker, idle) until the watchdog sampled
	// n more times.
	waitSamples := func(n uint64) error {
		target := samples() + n
		return pollOnWorker("the watchdog to sample", func() bool { return samples() >= target })
	}
	var attempts atomic.Int32
	out, err := p.supervise(context.Background(), nil, func(v *vm) (map[string]any, error) {
		attempts.Add(1)
		if err := waitSamples(1); err != nil { // the call's first sample
			return nil, err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 * 16 {
				allocSink = make([]byte, 1<<20)
			}
		}()
		<-done
		if err := waitSamples(2); err != nil { // samples that see the growth
			return nil, err
		}
		return map[string]any{"ok": true}, nil
	})
	if err != nil || out["ok"] != true {
		t.Fatalf("idle call beside 48 MiB allocated elsewhere = %v, %v; want it to succeed", out, err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1 (never stopped)", n)
	}
}
