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

// wallFactor bounds the wall-clock time of a call whose time budget is
// counted in CPU time, in time budgets.
const wallFactor = 10

// call is one script execution the watchdog supervises. Its time budget
// counts the CPU time of the thread it runs on (a call keeps its thread,
// Program.run), so that a call on a starved CPU (a flood, a busy machine)
// is not stopped for time it spent waiting, within wallFactor budgets of
// wall-clock time; where no thread CPU clock exists it counts wall-clock
// time.
type call struct {
	rt         *goja.Runtime
	ctx        context.Context
	task       *task         // the Run this call belongs to; nil in tests
	timeBudget time.Duration // the time budget
	deadline   time.Time     // without a CPU clock, interrupt after this
	wallLimit  time.Time     // with one, interrupt after this whatever the CPU time
	hard       time.Time     // give up waiting for the worker after this
	budget     uint64        // heap bytes the call may be charged with
	cpuState   atomic.Int32  // cpuPending until the worker set cpuClock (setCPUClock)
	cpuClock   atomic.Int32  // the worker thread's CPU-time clock, when cpuState is cpuKnown

	reason    atomic.Int32
	detail    string // guard message for reasonMemory or a regexp timeout, set on the worker goroutine
	uncharged bool   // a heap stop without the call's share over its budget; set by the watchdog before stop

	// Owned by the watchdog goroutine.
	startAllocs uint64
	startCPU    time.Duration // the worker thread's CPU time at the first sample
	startProc   time.Duration // the process's CPU time then
	shared      bool          // both were read: the call is charged by its CPU share
	timed       bool          // startCPU was read: the time budget counts CPU time
	started     bool
	stopped     bool // the watchdog saw the call stopped (its hard deadline moved)
	gaveUp      bool
}

// setBudget gives c a time budget from now: budget of CPU time within
// wallFactor budgets of wall-clock time (or budget of wall-clock time
// without a CPU clock, which the first sample tells).
func (c *call) setBudget(now time.Time, budget time.Duration) {
	c.timeBudget, c.deadline, c.wallLimit = budget, now.Add(budget), now.Add(wallFactor*budget)
	c.hard = c.wallLimit.Add(budget)
	c.started, c.timed, c.stopped = false, false, false
}

// overTime reports whether c has used its time budget at now: its
// thread's CPU time since its first sample, or the wall-clock limit; with
// no CPU clock, the wall-clock deadline.
func (c *call) overTime(now time.Time) bool {
	switch {
	case c.timed:
		cpu, ok := cpuTime(c.cpuClock.Load())
		return now.After(c.wallLimit) || !ok && now.After(c.deadline) || ok && cpu-c.startCPU > c.timeBudget
	case c.cpuState.Load() == cpuPending:
		return now.After(c.wallLimit) // the worker has not reached the call yet
	}
	return now.After(c.deadline)
}

// States of a call's CPU-time clock.
const (
	cpuPending int32 = iota // the worker has not read it yet
	cpuKnown
	cpuNone // no per-thread CPU clock here
)

// setCPUClock records the CPU-time clock of the thread the call runs on
// (ok false: none). The watchdog starts charging the call once it is set.
func (c *call) setCPUClock(clock int32, ok bool) {
	if !ok {
		c.cpuState.Store(cpuNone)
		return
	}
	c.cpuClock.Store(clock)
	c.cpuState.Store(cpuKnown)
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
// Go cannot attribute allocations to a goroutine, and goja keeps no
// account of a runtime's, so the allocation check starts from the
// process's: the heap bytes allocated since the first sample after the
// call started (so at most one tick of allocation goes uncounted, and a
// sub-millisecond call costs no metrics read). A call is charged with the
// share of that growth that matches its share of the process's CPU time
// over the same span, read from the CPU-time clock of its worker thread
// (a call keeps its OS thread while it runs, Program.run; the first
// sample waits until the call has read that clock), doubled for the
// garbage collector's workers, which run beside an allocating call on
// the other cores: a call that allocates is the one using the CPU, while
// one that runs beside a flood of large request bodies gets a small share
// of the flood's allocations.
// A call is stopped when it is charged with more than its budget
// (allocFactor × MaxBytes, at least 16 MiB; 32 MiB by default), or when
// the process grew by more than rawFactor budgets whatever the share
// (which bounds a call whose share a concurrent flood dilutes). Where no
// thread CPU clock exists (not Linux) the whole growth is charged. A call
// stopped although its own share stayed within the budget (or without a
// share) is tried again (heapRetries, run.go). Doubling a string from the
// budget reaches at most a few budgets before the next tick interrupts
// it, which keeps a bomb far below +256 MiB.
type watchdog struct {
	mu      sync.Mutex
	calls   map[*call]struct{}
	running bool
	samples uint64 // ticks so far, for tests
}

// rawFactor bounds the process's heap growth during a call, in budgets,
// whatever the call's share of the CPU.
const rawFactor = 4

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
	c.setBudget(time.Now(), budget)
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
		procCPU, procOK := cpuTime(processCPUClock)
		now := time.Now()
		for c := range w.calls {
			w.check(c, now, allocs, procCPU, procOK)
		}
		w.samples++
		w.mu.Unlock()
	}
}

// check enforces c's budgets at one sample; procCPU is the process's CPU
// time, when procOK.
func (w *watchdog) check(c *call, now time.Time, allocs uint64, procCPU time.Duration, procOK bool) {
	if state := c.cpuState.Load(); !c.started && state != cpuPending {
		c.started, c.startAllocs = true, allocs
		c.shared, c.timed = false, false
		if state == cpuKnown {
			c.startCPU, c.timed = cpuTime(c.cpuClock.Load())
			c.shared, c.startProc = c.timed && procOK, procCPU
		}
		if !c.timed {
			c.hard = c.deadline.Add(c.timeBudget)
		}
	}
	switch {
	case c.ctx.Err() != nil:
		c.stop(reasonCanceled)
	case c.overTime(now):
		c.stop(reasonTimeout)
	case c.started:
		if stop, charged := c.overBudget(allocs-c.startAllocs, procCPU); stop {
			c.uncharged = !charged
			c.stop(reasonMemory)
		}
	}
	if !c.stopped && c.reason.Load() != reasonNone {
		// a stopped call that keeps its worker (native code the interrupt
		// cannot reach) is given up one time budget later
		c.stopped, c.hard = true, minTime(c.hard, now.Add(c.timeBudget))
	}
	if !c.gaveUp && now.After(c.hard) {
		c.gaveUp = true
		if c.task != nil {
			c.task.abandon()
		}
	}
}

// minTime is the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// overBudget reports whether the call must be stopped: whether it is
// charged with more than its budget of grown, the process's heap growth
// since its first sample (all of it without a CPU share or when the
// clocks cannot be read, else its doubled share of the process's CPU
// time since then), or grown is beyond rawFactor budgets. charged is
// false when the call is stopped although its share stays within the
// budget, or without a share: a stop that others' allocations may have
// caused, which is worth trying again.
func (c *call) overBudget(grown uint64, procCPU time.Duration) (stop, charged bool) {
	if grown <= c.budget {
		return false, false
	}
	if !c.shared {
		return true, false
	}
	thread, ok := cpuTime(c.cpuClock.Load())
	proc := procCPU - c.startProc
	if !ok || proc <= 0 {
		return true, false
	}
	// doubled: the collector's workers take up to as much CPU as the
	// allocating call itself, which would halve a bomb's share
	share := min(1, 2*float64(thread-c.startCPU)/float64(proc))
	if float64(grown)*share > float64(c.budget) {
		return true, true
	}
	return grown > rawFactor*c.budget, false
}
