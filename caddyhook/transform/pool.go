package transform

import (
	"context"
	"sync"
	"time"
)

// pool hands out runtimes of one program. A slot is taken for the whole
// life of a call (including a worker that was abandoned and is still
// stuck in native code), so at most cap(slots) runtimes ever exist; idle
// runtimes are kept for reuse, each with its parked worker goroutine.
// The pool is closed when its Program becomes unreachable, which ends
// those goroutines.
type pool struct {
	slots  chan struct{}
	mu     sync.Mutex
	idle   []*vm
	closed bool
}

// newPool returns a pool of at most n runtimes.
func newPool(n int) *pool {
	return &pool{slots: make(chan struct{}, n)}
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
