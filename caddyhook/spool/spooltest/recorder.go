// Package spooltest provides a spool.Sender for the tests of the spool's
// users: it records every event it is given and answers 200, as a gateway
// that takes everything would.
package spooltest

import (
	"context"
	"net/http"
	"sync"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// Recorder is a spool.Sender that delivers every event: it keeps a copy
// of each and answers 200. Safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	evs []*spool.Event
}

// Send implements spool.Sender.
func (r *Recorder) Send(_ context.Context, ev *spool.Event) (int, string, error) {
	cp := *ev
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, &cp)
	return http.StatusOK, "", nil
}

// Events returns copies of the events sent so far, in order.
func (r *Recorder) Events() []*spool.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*spool.Event(nil), r.evs...)
}

// IDs returns the ids of the events sent so far, in order.
func (r *Recorder) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, len(r.evs))
	for i, ev := range r.evs {
		ids[i] = ev.ID
	}
	return ids
}

// Interface guard
var _ spool.Sender = (*Recorder)(nil)
