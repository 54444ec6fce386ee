package spool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

func TestOutageThenRecovery(t *testing.T) {
	tests := []struct {
		name string
		fail func() (int, string, error)
	}{
		{"gateway unreachable", func() (int, string, error) { return 0, "", errRefused }},
		{"gateway 503", func() (int, string, error) { return 503, "restarting", nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTest(t, testConfig(t))
			var down atomic.Bool
			down.Store(true)
			snd := &fakeSender{respond: func(*Event, int) (int, string, error) {
				if down.Load() {
					return tt.fail()
				}
				return 200, "", nil
			}}
			s.SetSender(snd)

			var ids []string
			for i := range 200 {
				kind := KindAgent
				if i%4 == 0 {
					kind = KindWake
				}
				id := fmt.Sprintf("ev-%03d", i)
				ids = append(ids, id)
				mustAppend(t, s, newEvent(kind, id))
			}
			testkit.WaitFor(t, "failed attempts", func() bool { return s.Stats().Retries >= 5 })
			if got := snd.delivered(""); len(got) != 0 {
				t.Fatalf("delivered %d events while down", len(got))
			}
			down.Store(false)
			testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })

			if got := snd.delivered(""); !testkit.SameSet(got, ids) {
				t.Fatalf("delivered %d events (%v), want each of the %d exactly once", len(got), got, len(ids))
			}
			st := s.Stats()
			if st.Delivered != 200 || st.DeadLetters != 0 || st.Dead != 0 || st.Retries < 5 {
				t.Fatalf("stats %+v: want 200 delivered, no dead letters, retries counted", st)
			}
			if failed := uint64(snd.callCount() - 200); st.Retries != failed {
				t.Fatalf("retries %d, want %d (one per failed call)", st.Retries, failed)
			}
			if got := snd.delivered(KindWake); !slices.IsSorted(got) {
				t.Fatalf("wake events out of order: %v", got)
			}
		})
	}
}

// TestUnreachablePausesSending: a send that gets no response pauses all
// sending. With a pause of about an hour, only the sends already handed
// out when the first one failed happen (at most one per agent worker);
// without the pause every one of the 100 events would be tried.
func TestUnreachablePausesSending(t *testing.T) {
	cfg := testConfig(t)
	cfg.RetryInitial, cfg.RetryMax = time.Hour, time.Hour
	s := openTest(t, cfg)
	for i := range 100 {
		mustAppend(t, s, newEvent(KindAgent, fmt.Sprint("a", i)))
	}
	snd := &fakeSender{respond: func(*Event, int) (int, string, error) { return 0, "", errRefused }}
	s.SetSender(snd)
	// settled: some send failed and was rescheduled, and none is in flight
	testkit.WaitFor(t, "the first failures to settle", func() bool {
		st := s.Stats()
		return snd.callCount() > 0 && st.InFlight == 0 && st.Retries == uint64(snd.callCount())
	})
	if n, max := snd.callCount(), cfg.withDefaults().agentWorkers(); n > max {
		t.Fatalf("%d sends to an unreachable gateway; want at most %d (the sends in flight when it failed)", n, max)
	}
	if st := s.Stats(); st.Depth != 100 {
		t.Fatalf("depth %d, want all 100 events kept", st.Depth)
	}
}

func TestWakeOrderAcrossRetries(t *testing.T) {
	cfg := testConfig(t)
	cfg.Workers = 4
	s := openTest(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	snd := &fakeSender{respond: func(ev *Event, call int) (int, string, error) {
		rngMu.Lock()
		r := rng.IntN(10)
		rngMu.Unlock()
		switch {
		case r < 2:
			return 503, "busy", nil
		case r < 3:
			return 0, "", errRefused
		}
		return 200, "", nil
	}}
	s.SetSender(snd)
	var wakes []string
	var wg sync.WaitGroup
	for i := range 150 {
		if i%2 == 0 {
			id := fmt.Sprintf("w-%03d", i)
			wakes = append(wakes, id)
			mustAppend(t, s, newEvent(KindWake, id)) // sequential: acceptance order is known
		} else {
			wg.Go(func() { mustAppend(t, s, newEvent(KindAgent, fmt.Sprintf("a-%03d", i))) })
		}
	}
	wg.Wait()
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })

	if got := snd.delivered(KindWake); !slices.Equal(got, wakes) {
		t.Fatalf("wake delivery order\n got %v\nwant %v", got, wakes)
	}
	// Head of line: no wake event was even tried before its predecessor succeeded.
	snd.mu.Lock()
	done := map[string]bool{}
	for _, c := range snd.calls {
		if c.kind != KindWake {
			continue
		}
		i := slices.Index(wakes, c.id)
		if i > 0 && !done[wakes[i-1]] {
			t.Errorf("%s tried before %s was delivered", c.id, wakes[i-1])
		}
		if c.status == 200 {
			done[c.id] = true
		}
	}
	snd.mu.Unlock()
	if s.Stats().Retries == 0 {
		t.Fatal("no retries happened; the test exercised nothing")
	}
}

func TestAgentsOldestReadyFirst(t *testing.T) {
	cfg := testConfig(t)
	cfg.Workers = 2 // one agent worker: order is observable
	s := openTest(t, cfg)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("a-%02d", i)
		ids = append(ids, id)
		mustAppend(t, s, newEvent(KindAgent, id))
	}
	snd := &fakeSender{}
	s.SetSender(snd)
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	if got := snd.delivered(""); !slices.Equal(got, ids) {
		t.Fatalf("agent order %v, want acceptance order", got)
	}
}

func TestDeadLetterOn4xx(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig(t)
	s, err := Open(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const secret = "SECRET-PAYLOAD-7731"
	tests := []struct {
		id        string
		status    int
		reason    string
		wantDead  bool
		wantError string
	}{
		{"bad-400", 400, "message required " + secret, true, "gateway status 400: message required " + secret},
		{"bad-403", 403, "forbidden", true, "gateway status 403: forbidden"},
		{"bad-404", 404, strings.Repeat("x", 1000), true, "gateway status 404: " + strings.Repeat("x", maxReasonLen-len("gateway status 404: "))},
		{"retry-429", 429, "slow down", false, ""},
		{"retry-500", 500, "oops", false, ""},
		{"ok", 200, "", false, ""},
	}
	byID := map[string]int{}
	for i, tt := range tests {
		byID[tt.id] = i
	}
	snd := &fakeSender{respond: func(ev *Event, call int) (int, string, error) {
		tt := tests[byID[ev.ID]]
		if !tt.wantDead && call > 0 {
			return 200, "", nil
		}
		return tt.status, tt.reason, nil
	}}
	s.SetSender(snd)
	for _, tt := range tests {
		ev := newEvent(KindAgent, tt.id)
		ev.Body = []byte(`{"message":"` + secret + `"}`)
		mustAppend(t, s, ev)
	}
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })

	dead, err := s.DeadLetters()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Event{}
	for _, ev := range dead {
		got[ev.ID] = ev
	}
	for _, tt := range tests {
		ev, isDead := got[tt.id]
		if isDead != tt.wantDead {
			t.Errorf("%s: dead=%v, want %v", tt.id, isDead, tt.wantDead)
			continue
		}
		if !isDead {
			continue
		}
		if ev.LastError != tt.wantError || ev.Attempts != 1 || ev.Seq == 0 || !strings.Contains(string(ev.Body), secret) {
			t.Errorf("%s: dead letter %+v; want reason %q, 1 attempt, body kept", tt.id, ev, tt.wantError)
		}
	}
	st := s.Stats()
	if st.Dead != 3 || st.DeadLetters != 3 || st.Delivered != 3 || st.Retries != 2 {
		t.Fatalf("stats %+v: want 3 dead, 3 delivered, 2 retries", st)
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, secret) {
			t.Fatalf("a log entry leaks payload or gateway reason: %s", line)
		}
	}
	if logs.FilterMessage("spool: event dead-lettered").Len() != 3 {
		t.Fatalf("want 3 dead-letter log entries, got %d", logs.FilterMessage("spool: event dead-lettered").Len())
	}
}

func TestDeadLetterOnMaxAge(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxAge = 150 * time.Millisecond
	s := openTest(t, cfg)
	snd := &fakeSender{respond: func(*Event, int) (int, string, error) { return 503, "down", nil }}

	start := time.Now() // no earlier than the fresh events' FirstSeen
	stale := newEvent(KindWake, "stale")
	stale.FirstSeen = time.Now().Add(-time.Hour)
	mustAppend(t, s, stale, newEvent(KindWake, "w"), newEvent(KindAgent, "a"))
	s.SetSender(snd)
	testkit.WaitFor(t, "expiry", func() bool { return s.Stats().Depth == 0 })
	if d := time.Since(start); d < cfg.MaxAge {
		t.Fatalf("fresh events expired after %v, before max_age %v", d, cfg.MaxAge)
	}
	dead, err := s.DeadLetters()
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	for _, ev := range dead {
		switch {
		case ev.ID == "stale" && ev.LastError != reasonExpired:
			t.Errorf("%s: reason %q, want %q (never attempted)", ev.ID, ev.LastError, reasonExpired)
		case ev.ID != "stale" && (!strings.HasPrefix(ev.LastError, "expired after ") || !strings.HasSuffix(ev.LastError, "; last: gateway status 503: down")):
			// the cause that killed it stays with it
			t.Errorf("%s: reason %q, want expired after its attempts with the last one's cause", ev.ID, ev.LastError)
		}
	}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	for _, c := range snd.calls {
		if c.id == "stale" {
			t.Fatal("an event older than max_age was sent")
		}
	}
}

func TestRestartResumesDelivery(t *testing.T) {
	cfg := testConfig(t)
	s, err := Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	failing := &fakeSender{respond: func(*Event, int) (int, string, error) { return 502, "bad gateway", nil }}
	var ids []string
	for i := range 40 {
		kind := KindAgent
		if i%2 == 0 {
			kind = KindWake
		}
		id := fmt.Sprintf("r-%02d", i)
		ids = append(ids, id)
		mustAppend(t, s, newEvent(kind, id))
	}
	s.SetSender(failing)
	testkit.WaitFor(t, "some failed attempts", func() bool { return s.Stats().Retries >= 10 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	failed := failing.callCount()

	s2 := openTest(t, cfg)
	if st := s2.Stats(); st.Depth != 40 {
		t.Fatalf("depth after restart %d, want 40", st.Depth)
	}
	// Attempts survived the restart.
	var attempts int
	s2.mu.Lock()
	for _, it := range s2.idx.age.items {
		attempts += it.attempts
	}
	s2.mu.Unlock()
	if attempts == 0 || attempts > failed {
		t.Fatalf("persisted attempts %d, want 1..%d", attempts, failed)
	}
	ok := &fakeSender{}
	s2.SetSender(ok)
	testkit.WaitFor(t, "drain after restart", func() bool { return s2.Stats().Depth == 0 })
	if got := ok.delivered(""); !testkit.SameSet(got, ids) {
		t.Fatalf("delivered after restart %v, want all of %v", got, ids)
	}
}

func TestCloseAbandonsInFlight(t *testing.T) {
	cfg := testConfig(t)
	s, err := Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	var ctxSeen atomic.Bool
	s.SetSender(senderFunc(func(ctx context.Context, ev *Event) (int, string, error) {
		started <- struct{}{}
		<-ctx.Done()
		ctxSeen.Store(true)
		return 0, "", ctx.Err()
	}))
	mustAppend(t, s, newEvent(KindAgent, "slow"))
	<-started
	done := make(chan error)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cancel the in-flight send")
	}
	if !ctxSeen.Load() {
		t.Fatal("sender's context was not cancelled")
	}
	if st := s.Stats(); st.Retries != 0 || st.Depth != 1 || st.InFlight != 0 {
		t.Fatalf("stats after Close %+v: want the event queued, no attempt counted", st)
	}

	s2 := openTest(t, cfg)
	ok := &fakeSender{}
	s2.SetSender(ok)
	testkit.WaitFor(t, "redelivery", func() bool { return len(ok.delivered("")) == 1 })
	if got := ok.delivered(""); got[0] != "slow" {
		t.Fatalf("delivered %v", got)
	}
}

func TestSetSenderReplaces(t *testing.T) {
	s := openTest(t, testConfig(t))
	old := &fakeSender{respond: func(*Event, int) (int, string, error) { return 503, "old", nil }}
	s.SetSender(old)
	mustAppend(t, s, newEvent(KindWake, "w"), newEvent(KindAgent, "a"))
	testkit.WaitFor(t, "old sender tried", func() bool { return old.callCount() >= 2 })
	repl := &fakeSender{}
	s.SetSender(repl)
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	if got := repl.delivered(""); !testkit.SameSet(got, []string{"w", "a"}) {
		t.Fatalf("replacement delivered %v", got)
	}
	if n := len(old.delivered("")); n != 0 {
		t.Fatalf("old sender delivered %d", n)
	}

	// nil pauses delivery: nothing may reach a sender before the resume
	var paused atomic.Bool
	paused.Store(true)
	resumed := &fakeSender{respond: func(ev *Event, _ int) (int, string, error) {
		if paused.Load() {
			t.Errorf("%s delivered while no sender was installed", ev.ID)
		}
		return 200, "", nil
	}}
	s.SetSender(nil)
	mustAppend(t, s, newEvent(KindAgent, "held"))
	if st := s.Stats(); st.Depth != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v while paused, want the event queued and idle", st)
	}
	paused.Store(false)
	s.SetSender(resumed)
	testkit.WaitFor(t, "resume", func() bool { return s.Stats().Depth == 0 })
	if got := resumed.delivered(""); len(got) != 1 || got[0] != "held" {
		t.Fatalf("delivered after the resume: %v", got)
	}
}

func TestSenderPanicRetries(t *testing.T) {
	s := openTest(t, testConfig(t))
	var calls atomic.Int32
	s.SetSender(senderFunc(func(ctx context.Context, ev *Event) (int, string, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return 200, "", nil
	}))
	mustAppend(t, s, newEvent(KindAgent, "p"))
	testkit.WaitFor(t, "delivery after panic", func() bool { return s.Stats().Delivered == 1 })
	if st := s.Stats(); st.Retries != 1 {
		t.Fatalf("retries %d, want 1", st.Retries)
	}
}

func TestRetryAndDrop(t *testing.T) {
	s := openTest(t, testConfig(t))
	var accept atomic.Bool
	snd := &fakeSender{respond: func(*Event, int) (int, string, error) {
		if accept.Load() {
			return 200, "", nil
		}
		return 400, "rejected", nil
	}}
	s.SetSender(snd)
	mustAppend(t, s, newEvent(KindWake, "d1"), newEvent(KindAgent, "d2"), newEvent(KindAgent, "d3"), newEvent(KindAgent, "d4"))
	testkit.WaitFor(t, "dead letters", func() bool { return s.Stats().Dead == 4 })
	bytesDead := s.Stats().Bytes

	tests := []struct {
		name    string
		op      func(...string) (int, error)
		ids     []string
		want    int
		wantIDs []string // dead letters left
	}{
		{"retry unknown", s.Retry, []string{"nope"}, 0, []string{"d1", "d2", "d3", "d4"}},
		{"drop one", s.Drop, []string{"d4"}, 1, []string{"d1", "d2", "d3"}},
		{"retry two", s.Retry, []string{"d1", "d2"}, 2, []string{"d3"}},
	}
	accept.Store(true)
	for _, tt := range tests {
		n, err := tt.op(tt.ids...)
		if err != nil || n != tt.want {
			t.Fatalf("%s: (%d, %v), want %d", tt.name, n, err, tt.want)
		}
		testkit.WaitFor(t, tt.name+" settles", func() bool { return s.Stats().Depth == 0 })
		dead, err := s.DeadLetters()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ev := range dead {
			ids = append(ids, ev.ID)
		}
		if !slices.Equal(ids, tt.wantIDs) {
			t.Fatalf("%s: dead letters %v, want %v", tt.name, ids, tt.wantIDs)
		}
	}
	if got := snd.delivered(""); !testkit.SameSet(got, []string{"d1", "d2"}) {
		t.Fatalf("requeued deliveries %v", got)
	}
	if st := s.Stats(); st.Dead != 1 || st.Bytes >= bytesDead {
		t.Fatalf("stats %+v: want 1 dead and fewer bytes than %d", st, bytesDead)
	}
	n, err := s.Drop()
	if err != nil || n != 1 {
		t.Fatalf("Drop() = %d, %v; want 1", n, err)
	}
	testkit.WaitFor(t, "bytes freed", func() bool { return s.Stats().Bytes == 0 })
	if st := s.Stats(); st.Dead != 0 {
		t.Fatalf("stats after drop-all %+v", st)
	}
}

func TestRetryAllOffline(t *testing.T) {
	cfg := testConfig(t)
	s, err := Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	s.SetSender(&fakeSender{respond: func(*Event, int) (int, string, error) { return 422, "no", nil }})
	mustAppend(t, s, newEvent(KindAgent, "x"), newEvent(KindWake, "y"))
	testkit.WaitFor(t, "dead letters", func() bool { return s.Stats().Dead == 2 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The CLI opens the store without a sender.
	cli := openTest(t, cfg)
	n, err := cli.Retry()
	if err != nil || n != 2 {
		t.Fatalf("Retry() = %d, %v", n, err)
	}
	if st := cli.Stats(); st.Depth != 2 || st.Dead != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := openTest(t, cfg)
	ok := &fakeSender{}
	s3.SetSender(ok)
	testkit.WaitFor(t, "delivered", func() bool { return s3.Stats().Delivered == 2 })
}

// senderFunc adapts a function to Sender.
type senderFunc func(ctx context.Context, ev *Event) (int, string, error)

func (f senderFunc) Send(ctx context.Context, ev *Event) (int, string, error) { return f(ctx, ev) }

// burySender is a fakeSender that records what Buried tells it.
type burySender struct {
	fakeSender
	mu     sync.Mutex
	buried map[string]string
}

func (b *burySender) Buried(ev *Event, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buried == nil {
		b.buried = map[string]string{}
	}
	b.buried[ev.ID] = reason
}

// TestDeadLetterOnIdenticalAnswers (issue 35 item 9): an event that gets
// the same answer a retry does not change (a 5xx but 502/503/504) MaxIdentical
// times in a row goes to the dead letters with that answer, and the
// sender is told; one whose answers change, or that gets 503s or
// network errors, keeps being retried.
func TestDeadLetterOnIdenticalAnswers(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxIdentical = 3
	s := openTest(t, cfg)
	const throws = `{"ok":false,"error":"hook mapping failed"}`
	snd := &burySender{}
	snd.respond = func(ev *Event, call int) (int, string, error) {
		switch ev.ID {
		case "throws":
			return 500, throws, nil
		case "varies": // two different 500s, then delivered
			if call >= 6 {
				return 200, "", nil
			}
			return 500, fmt.Sprint("error ", call%2), nil
		case "busy": // 503s, then delivered
			if call >= 6 {
				return 200, "", nil
			}
			return 503, "admission timeout", nil
		case "down":
			if call >= 6 {
				return 200, "", nil
			}
			return 0, "", errRefused
		}
		return 200, "", nil
	}
	s.SetSender(snd)
	for _, id := range []string{"throws", "varies", "busy", "down"} {
		mustAppend(t, s, newEvent(KindAgent, id))
	}
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	dead, err := s.DeadLetters()
	if err != nil {
		t.Fatal(err)
	}
	want := "gateway status 500: " + throws + " (the same answer 3 times in a row: not retried further; max_identical_errors)"
	if len(dead) != 1 || dead[0].ID != "throws" || dead[0].LastError != want || dead[0].Attempts != 3 {
		t.Fatalf("dead letters %+v, want only throws after 3 attempts with %q", dead, want)
	}
	snd.mu.Lock()
	told := snd.buried["throws"]
	snd.mu.Unlock()
	if told != want {
		t.Fatalf("the sender was told %q, want %q", told, want)
	}
	if got := snd.delivered(""); len(got) != 3 {
		t.Fatalf("delivered %v, want varies, busy and down", got)
	}
	if st := s.Stats(); st.MaxIdentical != 3 {
		t.Fatalf("stats MaxIdentical %d", st.MaxIdentical)
	}
}

// TestRepeatable: the answers a retry does not change.
func TestRepeatable(t *testing.T) {
	for status, want := range map[int]bool{500: true, 501: true, 505: true, 599: true, 502: false, 503: false, 504: false,
		429: false, 400: false, 200: false, 0: false, 600: false} {
		if Repeatable(status) != want {
			t.Errorf("Repeatable(%d) = %v", status, !want)
		}
	}
}
