package caddyhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/caddyhook/spool/spooltest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

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
	deliveredBy := func(s *spooltest.Recorder, id string) {
		t.Helper()
		testkit.WaitForState(t, func() string { return fmt.Sprintf("%s not delivered: %v", id, s.IDs()) }, func() bool {
			got := s.IDs()
			return len(got) > 0 && got[len(got)-1] == id
		})
	}
	running, refused, next := &spooltest.Recorder{}, &spooltest.Recorder{}, &spooltest.Recorder{}
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
	if got := refused.IDs(); len(got) != 0 {
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
