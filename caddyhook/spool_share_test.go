package caddyhook

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// recordingSender accepts every event and remembers its id.
type recordingSender struct {
	mu  sync.Mutex
	ids []string
}

func (s *recordingSender) Send(_ context.Context, ev *spool.Event) (int, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, ev.ID)
	return 200, "", nil
}

func (s *recordingSender) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// TestSpoolShareOldestDelivers: the oldest registration delivers; a
// newer one that goes away (a refused reload) never did; when the oldest
// goes (the old config is cleaned up), the next one takes over; with none
// left, events stay queued. A config cannot register twice.
func TestSpoolShareOldestDelivers(t *testing.T) {
	st, err := spool.Open(spool.Config{Dir: t.TempDir(), RetryInitial: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	share := newSpoolShare(st)
	defer share.Destruct()
	n := 0
	send := func() string {
		n++
		id := fmt.Sprintf("ev-%d", n)
		if err := st.Append(context.Background(), &spool.Event{ID: id, Kind: spool.KindAgent, Path: "/hooks/agent", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	deliveredBy := func(s *recordingSender, id string) {
		t.Helper()
		waitFor(t, func() string { return fmt.Sprintf("%s not delivered: %v", id, s.got()) }, func() bool {
			got := s.got()
			return len(got) > 0 && got[len(got)-1] == id
		})
	}
	running, refused, next := &recordingSender{}, &recordingSender{}, &recordingSender{}
	runningCfg, newCfg := make(chan struct{}), make(chan struct{})

	regRunning, err := share.register(running, spool.Rate{}, nil, runningCfg)
	if err != nil {
		t.Fatal(err)
	}
	deliveredBy(running, send())
	if _, err := share.register(refused, spool.Rate{}, nil, runningCfg); err == nil || !strings.Contains(err.Error(), "already used by another hooks handler of this config") {
		t.Fatalf("a second handler of the same config: %v, want refused", err)
	}

	regRefused, err := share.register(refused, spool.Rate{}, nil, newCfg)
	if err != nil {
		t.Fatal(err)
	}
	deliveredBy(running, send())
	regRefused.release()
	deliveredBy(running, send())
	if got := refused.got(); len(got) != 0 {
		t.Fatalf("the refused config's sender delivered %v", got)
	}

	regNext, err := share.register(next, spool.Rate{}, nil, newCfg)
	if err != nil {
		t.Fatal(err)
	}
	regRunning.release()
	deliveredBy(next, send())
	regNext.release()
	regNext.release() // twice is harmless
	send()
	if st := st.Stats(); st.Depth != 1 {
		t.Fatalf("depth %d with no sender registered, want the event kept", st.Depth)
	}
}
