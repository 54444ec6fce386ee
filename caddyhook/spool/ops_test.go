package spool

import (
	"errors"
	"slices"
	"testing"
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
	waitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	if got := snd.delivered(KindWake); !slices.Equal(got, ids) {
		t.Fatalf("wake order %v, want %v", got, ids)
	}
	if st := s.Stats(); st.Paused || st.Delivered != 5 {
		t.Fatalf("stats after resume %+v", st)
	}
}

// TestPauseSurvivesRebinding: a new binding (a config reload) does not
// resume a paused spool.
func TestPauseSurvivesRebinding(t *testing.T) {
	s := openTest(t, testConfig(t))
	first := &fakeSender{}
	releaseFirst := s.Bind(first, Rate{})
	_ = s.Pause()
	mustAppend(t, s, newEvent(KindAgent, "held"))
	second := &fakeSender{}
	releaseSecond := s.Bind(second, Rate{})
	releaseFirst()
	if st := s.Stats(); !st.Paused || st.Depth != 1 {
		t.Fatalf("after rebinding: %+v", st)
	}
	_ = s.Resume()
	waitFor(t, "delivery", func() bool { return s.Stats().Depth == 0 })
	if len(first.delivered("")) != 0 || len(second.delivered("")) != 1 {
		t.Fatalf("first delivered %v, second %v", first.delivered(""), second.delivered(""))
	}
	releaseSecond()
}

// TestBindStack: the newest unreleased binding delivers; releasing it
// (a refused reload) hands delivery back to the previous one; with none
// left, delivery waits.
func TestBindStack(t *testing.T) {
	s := openTest(t, testConfig(t))
	running, refused := &fakeSender{}, &fakeSender{}
	releaseRunning := s.Bind(running, Rate{})
	releaseRefused := s.Bind(refused, Rate{})
	releaseRefused()
	releaseRefused() // idempotent
	mustAppend(t, s, newEvent(KindAgent, "e1"))
	waitFor(t, "delivery", func() bool { return s.Stats().Depth == 0 })
	if len(running.delivered("")) != 1 || refused.callCount() != 0 {
		t.Fatalf("running %v, refused %d calls", running.delivered(""), refused.callCount())
	}
	releaseRunning()
	mustAppend(t, s, newEvent(KindAgent, "e2"))
	if s.sender.Load() != nil {
		t.Fatal("a sender is still in force after every release")
	}
	next := &fakeSender{}
	defer s.Bind(next, Rate{})()
	waitFor(t, "delivery by the next binding", func() bool { return s.Stats().Depth == 0 })
	if got := next.delivered(""); !slices.Equal(got, []string{"e2"}) {
		t.Fatalf("next delivered %v", got)
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
