package natscluster

import (
	"os"
	"sync"
)

// hub fans reachability changes out to watchers, each called from its own
// goroutine, in order, once per change.
type hub struct {
	mu       sync.Mutex
	watchers map[*watcher]struct{}
	closed   bool
}

type watcher struct {
	fn   func(bool)
	mu   sync.Mutex
	q    []bool
	last bool
	sig  chan struct{}
	done chan struct{}

	stopOnce sync.Once
}

func (h *hub) init() { h.watchers = make(map[*watcher]struct{}) }

// watch registers fn, starting from state now (fn is not called for it).
func (h *hub) watch(fn func(bool), now bool) (stop func()) {
	w := &watcher{fn: fn, last: now, sig: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return func() {}
	}
	h.watchers[w] = struct{}{}
	h.mu.Unlock()
	go w.run()
	return func() {
		h.mu.Lock()
		delete(h.watchers, w)
		h.mu.Unlock()
		w.stop()
	}
}

// stop ends the watcher's goroutine; the hub closing and the watcher's
// own stop func may both call it.
func (w *watcher) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// publish queues state for every watcher.
func (h *hub) publish(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		w.mu.Lock()
		w.q = append(w.q, up)
		w.mu.Unlock()
		signal(w.sig)
	}
}

// close stops every watcher.
func (h *hub) close() {
	h.mu.Lock()
	ws := h.watchers
	h.watchers, h.closed = nil, true
	h.mu.Unlock()
	for w := range ws {
		w.stop()
	}
}

func (w *watcher) run() {
	for {
		select {
		case <-w.done:
			return
		case <-w.sig:
		}
		w.mu.Lock()
		q := w.q
		w.q = nil
		w.mu.Unlock()
		for _, up := range q {
			if up != w.last {
				w.last = up
				w.fn(up)
			}
		}
	}
}

// hostname is a short host name for node ids.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	return h[:min(len(h), 24)]
}
