package spool

import (
	"errors"
	"slices"
	"testing"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestPauseResume: while paused, events are accepted and stay queued;
// after Resume they are delivered, wakes in acceptance order.
func TestPauseResume(t *testing.T) {
	s := openTest(t, testConfig(t))
	snd := &fakeSender{}
	s.SetSender(snd)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ids := []string{"w1", "w2", "w3", "w4"}
	for _, id := range ids {
		mustAppend(t, s, newEvent(KindWake, id))
	}
	mustAppend(t, s, newEvent(KindAgent, "a1"))
	st, err := s.Status()
	if err != nil || !st.Paused || st.Depth != 5 {
		t.Fatalf("Status() = %+v, %v: want paused with 5 queued", st, err)
	}
	if n := snd.callCount(); n != 0 {
		t.Fatalf("%d sends while paused", n)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	if got := snd.delivered(KindWake); !slices.Equal(got, ids) {
		t.Fatalf("wake order %v, want %v", got, ids)
	}
	if st := s.Stats(); st.Paused || st.Delivered != 5 {
		t.Fatalf("stats after resume %+v", st)
	}
}

// TestPauseSurvivesNewSender: a new sender (a config reload) does not
// resume a paused spool.
func TestPauseSurvivesNewSender(t *testing.T) {
	s := openTest(t, testConfig(t))
	first := &fakeSender{}
	s.SetSender(first)
	_ = s.Pause()
	mustAppend(t, s, newEvent(KindAgent, "held"))
	second := &fakeSender{}
	s.SetSender(second)
	s.SetRate(Rate{})
	if st := s.Stats(); !st.Paused || st.Depth != 1 {
		t.Fatalf("after a new sender: %+v", st)
	}
	_ = s.Resume()
	testkit.WaitFor(t, "delivery", func() bool { return s.Stats().Depth == 0 })
	if len(first.delivered("")) != 0 || len(second.delivered("")) != 1 {
		t.Fatalf("first delivered %v, second %v", first.delivered(""), second.delivered(""))
	}
}

func TestOpsAfterClose(t *testing.T) {
	s := openTest(t, testConfig(t))
	_ = s.Close()
	for name, err := range map[string]error{"Pause": s.Pause(), "Resume": s.Resume()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, err := s.Status(); !errors.Is(err, ErrClosed) {
		t.Errorf("Status after Close: %v", err)
	}
}
