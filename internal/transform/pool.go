package transform

import (
	"context"
	"sync"
	"time"
)

// pool hands out runtimes of one program. A slot is taken for the life of
// a call; idle runtimes are kept for reuse, each with its parked worker
// goroutine. A call the supervisor abandoned (its worker still stuck in
// native code past twice the time budget) gives its slot back at once, so
// capacity does not shrink, and its runtime is dropped when the worker
// returns; at most cap(slots) such zombies are counted, beyond which an
// abandoned call keeps its slot until it ends. So at most 2×cap(slots)
// runtimes ever exist. The pool is closed when its Program becomes
// unreachable, which ends the parked goroutines.
type pool struct {
	slots   chan struct{}
	mu      sync.Mutex
	idle    []*vm
	zombies int
	closed  bool
}

// newPool returns a pool of at most n runtimes.
func newPool(n int) *pool {
	return &pool{slots: make(chan struct{}, n)}
}

// task is one Run: the pool slot it holds and the signal that the
// supervisor gave up waiting for it.
type task struct {
	p         *pool
	abandoned chan struct{} // closed once a call of the task passed its hard deadline

	mu       sync.Mutex
	holding  bool // the task still holds its slot
	zombie   bool // counted in p.zombies
	finished bool
}

// newTask returns a task holding a slot the caller acquired.
func (p *pool) newTask() *task {
	return &task{p: p, abandoned: make(chan struct{}), holding: true}
}

// abandon is called once, by the watchdog, when the task's call passed
// its hard deadline: the supervisor stops waiting, and the slot is given
// back if the zombie allowance permits.
func (t *task) abandon() {
	close(t.abandoned)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return
	}
	t.p.mu.Lock()
	if t.p.zombies < cap(t.p.slots) {
		t.p.zombies++
		t.zombie = true
	}
	t.p.mu.Unlock()
	if t.zombie && t.holding {
		t.holding = false
		t.p.release()
	}
}

// finish is called by the worker when the task ends: the slot is given
// back unless abandon already did, and a zombie is no longer counted.
func (t *task) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finished = true
	if t.holding {
		t.holding = false
		t.p.release()
	}
	if t.zombie {
		t.p.mu.Lock()
		t.p.zombies--
		t.p.mu.Unlock()
	}
}

// acquire takes a slot, waiting at most wait or until ctx is done.
func (p *pool) acquire(ctx context.Context, wait time.Duration) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errNoRuntime
	}
}

// release gives a slot back.
func (p *pool) release() { <-p.slots }

// take returns an idle runtime, or nil when a new one must be made.
func (p *pool) take() *vm {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	v := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return v
}

// put returns a healthy, initialised runtime for reuse; it reports false
// when the pool is closed and the runtime must be dropped.
func (p *pool) put(v *vm) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.idle = append(p.idle, v)
	return true
}

// close ends the worker goroutines of idle runtimes and makes put refuse
// runtimes coming back from running calls.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, v := range p.idle {
		close(v.jobs)
	}
	p.idle = nil
}
