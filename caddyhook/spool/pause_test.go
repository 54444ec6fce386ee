package spool

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestPauseDoesNotCountTowardMaxAge (issue 21 item 3): events held by an
// operator's pause for longer than max_age are delivered on resume, not
// dead-lettered as expired with 0 attempts: whether accepted before the
// pause or during it, and across a restart of the store while paused.
// Time that is not paused still counts: an event that waits past max_age
// while the gateway is down expires.
func TestPauseDoesNotCountTowardMaxAge(t *testing.T) {
	const maxAge = 200 * time.Millisecond
	cfg := testConfig(t)
	cfg.MaxAge = maxAge
	s := openTest(t, cfg)
	snd := &fakeSender{}
	s.SetSender(snd)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, newEvent(KindAgent, "held-1"), newEvent(KindWake, "held-2"))
	accepted := time.Now()
	// held longer than max_age (1.5 × max_age, as in the report)
	testkit.WaitFor(t, "the held events to outlive max_age", func() bool { return time.Since(accepted) > maxAge*3/2 })
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "both held events delivered", func() bool { return len(snd.delivered("")) == 2 })
	if st := s.Stats(); st.Dead != 0 {
		t.Fatalf("%d dead letters after the resume, want 0", st.Dead)
	}

	// paused across a restart: the pause ends with the process, what it
	// held does not expire when the store opens again
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, newEvent(KindAgent, "held-3"))
	accepted = time.Now()
	testkit.WaitFor(t, "held-3 to outlive max_age", func() bool { return time.Since(accepted) > maxAge*3/2 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, cfg)
	if st := s2.Stats(); st.Paused || st.Depth != 1 {
		t.Fatalf("after the restart: %+v, want delivering with held-3 queued", st)
	}
	snd2 := &fakeSender{}
	s2.SetSender(snd2)
	testkit.WaitFor(t, "held-3 delivered after the restart", func() bool { return len(snd2.delivered("")) == 1 })
	if st := s2.Stats(); st.Dead != 0 {
		t.Fatalf("%d dead letters after the restart, want 0", st.Dead)
	}

	// not paused: max_age counts
	down := &fakeSender{respond: func(*Event, int) (int, string, error) { return 0, "", errRefused }}
	s2.SetSender(down)
	mustAppend(t, s2, newEvent(KindAgent, "gateway-down"))
	testkit.WaitFor(t, "the unpaused event expired", func() bool { return s2.Stats().Dead == 1 })
	dead, err := s2.DeadLetters()
	if err != nil || len(dead) != 1 || dead[0].ID != "gateway-down" || !IsExpired(dead[0].LastError) ||
		!strings.Contains(dead[0].LastError, "; last: send: ") {
		t.Fatalf("dead letters %+v, %v; want gateway-down expired with its last error", dead, err)
	}
}

// TestPauseRecord: the recorded pauses round-trip, and a record that is
// not one is refused rather than misread.
func TestPauseRecord(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 5)
	spans := []pauseSpan{{t0, t0.Add(time.Minute)}, {t0.Add(time.Hour), time.Time{}}}
	got, err := decodePauses(encodePauses(spans))
	if err != nil || len(got) != 2 || !got[0].start.Equal(t0) || !got[0].end.Equal(t0.Add(time.Minute)) ||
		!got[1].start.Equal(t0.Add(time.Hour)) || !got[1].end.IsZero() {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{{}, {2, 1}, append(encodePauses(spans), 0), {0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := decodePauses(bad); err == nil {
			t.Errorf("decodePauses(%x) accepted", bad)
		}
	}
}

// TestReconfigure (issue 25 item 1): a running store takes the settings of
// a new config: max_age (a waiting event expires under the shorter one),
// max_bytes, and the number of delivery workers, up and down.
func TestReconfigure(t *testing.T) {
	cfg := testConfig(t)
	cfg.Workers = 2 // one wake worker, one agent worker
	s := openTest(t, cfg)
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	snd := &fakeSender{respond: func(*Event, int) (int, string, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return 200, "", nil
	}}
	s.SetSender(snd)
	concurrent := func() int { mu.Lock(); defer mu.Unlock(); return inFlight }
	for i := range 8 {
		mustAppend(t, s, newEvent(KindAgent, "a"+string(rune('0'+i))))
	}
	testkit.WaitFor(t, "one agent delivery in flight", func() bool { return concurrent() == 1 })
	more := cfg
	more.Workers = 5 // four agent workers
	s.Reconfigure(more)
	testkit.WaitFor(t, "four agent deliveries in flight", func() bool { return concurrent() == 4 })
	if st := s.Stats(); st.Workers != 5 {
		t.Fatalf("workers in force %d, want 5", st.Workers)
	}
	s.Reconfigure(cfg) // back to one agent worker: the others leave as they finish
	close(release)
	testkit.WaitFor(t, "all delivered", func() bool { return len(snd.delivered("")) == 8 })
	mu.Lock()
	if most != 4 {
		t.Errorf("at most %d in flight, want 4", most)
	}
	mu.Unlock()
	testkit.WaitFor(t, "the extra workers gone", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.agentActive == 1 })

	// max_age: an event retried against a gateway that is down expires
	// under the new, shorter limit
	s.SetSender(&fakeSender{respond: func(*Event, int) (int, string, error) { return 503, "down", nil }})
	mustAppend(t, s, newEvent(KindAgent, "retried"))
	short := cfg
	short.MaxAge = 50 * time.Millisecond
	short.MaxBytes = 1 << 20
	s.Reconfigure(short)
	testkit.WaitFor(t, "the event expired under the new max_age", func() bool { return s.Stats().Dead == 1 })
	if st := s.Stats(); st.MaxAge != short.MaxAge || st.MaxBytes != short.MaxBytes {
		t.Fatalf("settings in force %+v", st)
	}
	big := &Event{ID: "big", Kind: KindAgent, Path: "/hooks/agent", Body: make([]byte, 1<<20)}
	if err := s.Append(context.Background(), big); err != ErrFull {
		t.Fatalf("append over the new max_bytes: %v, want ErrFull", err)
	}
}
