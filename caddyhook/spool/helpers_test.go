package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// testConfig is a fast-retrying configuration in a fresh directory.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Dir:          t.TempDir(),
		RetryInitial: 2 * time.Millisecond,
		RetryMax:     10 * time.Millisecond,
	}
}

// openTest opens a store that is closed when the test ends.
func openTest(t *testing.T, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newEvent builds a valid event of kind with id.
func newEvent(kind, id string) *Event {
	return &Event{
		ID:   id,
		Kind: kind,
		Path: "/hooks/" + kind,
		Body: fmt.Appendf(nil, `{"id":%q}`, id),
	}
}

// mustAppend appends evs or fails the test.
func mustAppend(t *testing.T, s *Store, evs ...*Event) {
	t.Helper()
	if err := s.Append(context.Background(), evs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// attempt is one call a fakeSender received.
type attempt struct {
	id     string
	kind   string
	status int
}

// fakeSender answers with respond and records every call.
type fakeSender struct {
	respond func(ev *Event, call int) (int, string, error)

	mu    sync.Mutex
	calls []attempt
	body  map[string][]byte
}

var errRefused = errors.New("dial unix /run/gw.sock: connect: connection refused")

func (f *fakeSender) Send(ctx context.Context, ev *Event) (int, string, error) {
	f.mu.Lock()
	n := 0
	for _, c := range f.calls {
		if c.id == ev.ID {
			n++
		}
	}
	f.mu.Unlock()
	status, reason, err := 200, "", error(nil)
	if f.respond != nil {
		status, reason, err = f.respond(ev, n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, attempt{id: ev.ID, kind: ev.Kind, status: status})
	if f.body == nil {
		f.body = map[string][]byte{}
	}
	f.body[ev.ID] = ev.Body
	return status, reason, err
}

// delivered returns the ids answered 2xx, in order.
func (f *fakeSender) delivered(kind string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.status/100 == 2 && (kind == "" || c.kind == kind) {
			out = append(out, c.id)
		}
	}
	return out
}

// callCount returns the number of Send calls so far.
func (f *fakeSender) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}
