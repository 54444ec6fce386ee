package spooltest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// TestRecorder: every event sent is kept as a copy, in order, and
// answered 200; concurrent sends are all kept.
func TestRecorder(t *testing.T) {
	var r Recorder
	ev := &spool.Event{ID: "a", Body: []byte("x")}
	if status, reason, err := r.Send(context.Background(), ev); status != 200 || reason != "" || err != nil {
		t.Fatalf("Send = %d %q %v", status, reason, err)
	}
	ev.ID = "changed"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _, _ = r.Send(context.Background(), &spool.Event{ID: "b"}) })
	}
	wg.Wait()
	ids := r.IDs()
	if len(ids) != 9 || ids[0] != "a" || slices.Index(ids[1:], "a") >= 0 {
		t.Fatalf("ids %v, want a then eight b", ids)
	}
	if evs := r.Events(); len(evs) != 9 || evs[0].ID != "a" || string(evs[0].Body) != "x" {
		t.Fatalf("events %+v", evs)
	}
}
