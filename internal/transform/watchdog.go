package transform

import (
	"context"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// watchTick is how often the watchdog samples the clock and the heap.
const watchTick = time.Millisecond

// allocMetric counts every byte the Go heap ever allocated. Large objects
// (the strings and slices a memory bomb builds) are counted as soon as
// they are allocated; small ones when their span is refilled.
const allocMetric = "/gc/heap/allocs:bytes"

// stop reasons recorded on a call; the first one wins.
const (
	reasonNone int32 = iota
	reasonTimeout
	reasonCanceled
	reasonMemory
)

// call is one script execution the watchdog supervises.
type call struct {
	rt       *goja.Runtime
	ctx      context.Context
	task     *task     // the Run this call belongs to; nil in tests
	deadline time.Time // interrupt after this
	hard     time.Time // give up waiting for the worker after this
	budget   uint64    // heap bytes the process may allocate during the call

	reason atomic.Int32
	detail string // guard message for reasonMemory or a regexp timeout, set on the worker goroutine

	// Owned by the watchdog goroutine.
	startAllocs uint64
	started     bool
	gaveUp      bool
}

// stop records why the call must end and interrupts its runtime. It is
// safe from any goroutine while the call is registered.
func (c *call) stop(reason int32) {
	if c.reason.CompareAndSwap(reasonNone, reason) {
		c.rt.Interrupt(reason)
	}
}

// watchdog enforces time and allocation budgets for every running call of
// the programs that share it. One goroutine ticks every millisecond while
// at least one call is registered and exits when none is, so an idle
// program costs nothing and needs no Close.
//
// The allocation check is process-wide: Go cannot attribute allocations to
// a goroutine. A call is stopped when the heap grew by more than its budget
// (allocFactor × MaxBytes, at least 16 MiB; 32 MiB by default) since the
// first sample after the call started (so at most one tick of allocation
// goes uncounted, and a sub-millisecond call costs no metrics read). A
// trivial call allocates tens of kilobytes, so 200 concurrent calls stay an
// order of magnitude below the budget; but a call that runs while the
// process allocates hundreds of MB/s for other reasons (a flood of large
// request bodies) can be stopped spuriously, so a call this check stopped
// is tried again on a fresh runtime (heapRetries, run.go). goja keeps no
// account of a runtime's allocations that a per-call bound could use.
// Doubling a string from the budget reaches at most twice the budget
// before the next tick interrupts it, which keeps a bomb far below +256 MiB.
type watchdog struct {
	mu      sync.Mutex
	calls   map[*call]struct{}
	running bool
}

// newWatchdog returns an idle watchdog.
func newWatchdog() *watchdog {
	return &watchdog{calls: make(map[*call]struct{})}
}

// add registers c; c.rt must be set. From now on c may be interrupted.
func (w *watchdog) add(c *call) {
	w.mu.Lock()
	w.calls[c] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
}

// renew gives the registered call c a fresh time and allocation budget
// from now, for the next of several calls made under one registration.
func (w *watchdog) renew(c *call, budget time.Duration) {
	w.mu.Lock()
	now := time.Now()
	c.deadline, c.hard, c.started = now.Add(budget), now.Add(2*budget), false
	w.mu.Unlock()
}

// remove unregisters c. Once it returns, c.rt is never interrupted again
// by the watchdog, so ClearInterrupt is safe.
func (w *watchdog) remove(c *call) {
	w.mu.Lock()
	delete(w.calls, c)
	w.mu.Unlock()
}

// loop samples and enforces until no call is registered.
func (w *watchdog) loop() {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	sample := []metrics.Sample{{Name: allocMetric}}
	for range t.C {
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		metrics.Read(sample)
		allocs := sample[0].Value.Uint64()
		now := time.Now()
		for c := range w.calls {
			w.check(c, now, allocs)
		}
		w.mu.Unlock()
	}
}

// check enforces c's budgets at one sample.
func (w *watchdog) check(c *call, now time.Time, allocs uint64) {
	if !c.started {
		c.started, c.startAllocs = true, allocs
	}
	switch {
	case c.ctx.Err() != nil:
		c.stop(reasonCanceled)
	case now.After(c.deadline):
		c.stop(reasonTimeout)
	case allocs-c.startAllocs > c.budget:
		c.stop(reasonMemory)
	}
	if !c.gaveUp && now.After(c.hard) {
		c.gaveUp = true
		if c.task != nil {
			c.task.abandon()
		}
	}
}
