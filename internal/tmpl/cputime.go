package tmpl

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/caddyhook/caddyhook/internal/cpuclock"
)

// wallFactor bounds the wall-clock time of an evaluation whose time
// bound counts CPU time, in time bounds.
const wallFactor = 10

// evalContext is the context an evaluation with the time bound budget
// runs under, and what ends it (done, called when the evaluation
// returns). The bound counts the CPU time of the evaluating thread (the
// caller is locked to its thread until done), so that an evaluation on a
// starved CPU (a flood, a busy machine) is not stopped for time it spent
// waiting, within wallFactor bounds of wall-clock time; where no thread
// CPU clock exists it counts wall-clock time. The context is looked at
// between comprehension iterations (interruptEvery).
func evalContext(budget time.Duration) (ctx context.Context, done func()) {
	runtime.LockOSThread()
	clock, ok := cpuclock.Thread()
	var start time.Duration
	if ok {
		start, ok = cpuclock.Read(clock)
	}
	if !ok {
		runtime.UnlockOSThread()
		return context.WithTimeout(context.Background(), budget)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &cpuWatch{clock: clock, start: start, budget: budget, wallLimit: time.Now().Add(wallFactor * budget), cancel: cancel}
	w.mu.Lock()
	w.timer = time.AfterFunc(budget, w.check) // no CPU time can be over budget before then
	w.mu.Unlock()
	return ctx, func() {
		w.mu.Lock()
		w.stopped = true
		w.timer.Stop()
		w.mu.Unlock()
		cancel(context.Canceled)
		runtime.UnlockOSThread()
	}
}

// cpuWatch ends an evaluation's context once its thread used its budget
// of CPU time, or its wall-clock limit passed.
type cpuWatch struct {
	clock     int32
	start     time.Duration // the thread's CPU time when the evaluation began
	budget    time.Duration
	wallLimit time.Time
	cancel    context.CancelCauseFunc // with DeadlineExceeded: the bound is spent

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool // the evaluation returned: the thread is no longer its
}

// check runs when the budget could be spent: it ends the context, or
// looks again when what is left of the budget could be.
func (w *cpuWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	used, ok := cpuclock.Read(w.clock)
	left, wall := w.budget-(used-w.start), time.Until(w.wallLimit)
	if !ok || left <= 0 || wall <= 0 {
		w.cancel(context.DeadlineExceeded)
		return
	}
	w.timer.Reset(min(left, wall))
}
