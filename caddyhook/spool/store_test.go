package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"defaults", Config{Dir: "/x"}, ""},
		{"no dir", Config{}, "dir is required"},
		{"negative bytes", Config{Dir: "/x", MaxBytes: -1}, "max_bytes"},
		{"negative age", Config{Dir: "/x", MaxAge: -time.Second}, "max_age"},
		{"negative initial", Config{Dir: "/x", RetryInitial: -1}, "retry_initial"},
		{"max below initial", Config{Dir: "/x", RetryInitial: time.Minute, RetryMax: time.Second}, "retry_max"},
		{"max below default initial", Config{Dir: "/x", RetryMax: time.Millisecond}, "retry_max"},
		{"negative workers", Config{Dir: "/x", Workers: -2}, "workers"},
		{"negative lock timeout", Config{Dir: "/x", LockTimeout: -1}, "lock timeout"},
		{"negative max identical errors", Config{Dir: "/x", MaxIdentical: -1}, "max_identical_errors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	got := Config{Dir: "/x"}.withDefaults()
	want := Config{Dir: "/x", MaxBytes: 1 << 30, MaxAge: 72 * time.Hour, RetryInitial: time.Second,
		RetryMax: 5 * time.Minute, Workers: 4, LockTimeout: time.Second, MaxIdentical: DefaultMaxIdentical}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	if n := (Config{Workers: 1}).agentWorkers(); n != 1 {
		t.Fatalf("agent workers for workers=1: %d, want 1", n)
	}
	if n := want.agentWorkers(); n != 3 {
		t.Fatalf("agent workers for workers=4: %d, want 3", n)
	}
}

func TestAppendValidates(t *testing.T) {
	s := openTest(t, testConfig(t))
	tests := []struct {
		name string
		ev   *Event
	}{
		{"nil", nil},
		{"no id", &Event{Kind: KindWake, Path: "/w"}},
		{"long id", &Event{ID: strings.Repeat("i", 257), Kind: KindWake, Path: "/w"}},
		{"bad kind", &Event{ID: "a", Kind: "other", Path: "/w"}},
		{"no path", &Event{ID: "a", Kind: KindAgent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Append(context.Background(), newEvent(KindWake, "ok"), tt.ev)
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Append = %v, want ErrInvalidEvent", err)
			}
		})
	}
	if st := s.Stats(); st.Depth != 0 || st.Bytes != 0 {
		t.Fatalf("a rejected call stored something: %+v", st)
	}
}

func TestAppendStoresExactly(t *testing.T) {
	cfg := testConfig(t)
	s := openTest(t, cfg)
	first := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	evs := []*Event{
		{ID: "w1", Kind: KindWake, Path: "/hooks/wake", Body: []byte(`{"text":"a","mode":"now"}`), ClientIP: "192.0.2.1", FirstSeen: first},
		{ID: "a1", Kind: KindAgent, Path: "/hooks/agent", Body: []byte(`{"message":"m"}`)},
	}
	before := time.Now()
	mustAppend(t, s, evs...)
	if evs[0].Seq == 0 || evs[1].Seq != evs[0].Seq+1 {
		t.Fatalf("seqs %d, %d: want consecutive, non-zero", evs[0].Seq, evs[1].Seq)
	}
	if evs[1].FirstSeen.Before(before) {
		t.Fatalf("zero FirstSeen not set to now: %v", evs[1].FirstSeen)
	}
	for _, want := range evs {
		got, err := s.loadQueued(want.Seq)
		if err != nil {
			t.Fatal(err)
		}
		sameEvent(t, got, want)
	}
	st := s.Stats()
	if st.Depth != 2 || st.Appended != 2 || st.Commits != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v: want depth 2, appended 2, one commit", st)
	}
	if st.OldestAge < time.Minute {
		t.Fatalf("oldest age %v, want ≥ 1m (FirstSeen kept)", st.OldestAge)
	}
	var size int64
	for _, ev := range evs {
		size += recordSize(encodeEvent(ev))
	}
	if st.Bytes != size {
		t.Fatalf("bytes %d, want %d", st.Bytes, size)
	}
}

func TestReopenRecomputesState(t *testing.T) {
	cfg := testConfig(t)
	s, err := Open(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		kind := KindAgent
		if i%3 == 0 {
			kind = KindWake
		}
		mustAppend(t, s, newEvent(kind, fmt.Sprint("e", i)))
	}
	want := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Append(context.Background(), newEvent(KindWake, "late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := s.DeadLetters(); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeadLetters after Close = %v, want ErrClosed", err)
	}

	s2 := openTest(t, cfg)
	got := s2.Stats()
	if got.Depth != want.Depth || got.Bytes != want.Bytes || got.Dead != 0 {
		t.Fatalf("after reopen %+v, want depth %d bytes %d", got, want.Depth, want.Bytes)
	}
	if fi, err := os.Stat(filepath.Join(cfg.Dir, DBFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("db file: %v, %v; want mode 0600", fi, err)
	}
}

func TestOpenLocked(t *testing.T) {
	cfg := testConfig(t)
	cfg.LockTimeout = 50 * time.Millisecond
	openTest(t, cfg)
	start := time.Now()
	_, err := Open(cfg, zap.NewNop())
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 10*time.Second { // did not hang (lock timeout 50ms)
		t.Fatalf("ErrLocked took %v", d)
	}
}

func TestOpenUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: file}, nil); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("Open on a file as dir = %v, want a creation error", err)
	}
}

func TestBackpressure(t *testing.T) {
	cfg := testConfig(t)
	probe := newEvent(KindAgent, "a-000")
	probe.FirstSeen = time.Now()
	one := recordSize(encodeEvent(probe))
	cfg.MaxBytes = 10*one + one/2 // room for exactly 10 events
	s := openTest(t, cfg)

	var mu sync.Mutex
	var accepted []string
	full := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				id := fmt.Sprintf("a-%d%02d", g, i)
				err := s.Append(context.Background(), newEvent(KindAgent, id))
				mu.Lock()
				switch {
				case err == nil:
					accepted = append(accepted, id)
				case errors.Is(err, ErrFull):
					full++
				default:
					t.Errorf("Append: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(accepted) != 10 || full != 30 {
		t.Fatalf("accepted %d, full %d; want 10 and 30", len(accepted), full)
	}
	if st := s.Stats(); st.Bytes > cfg.MaxBytes || st.Depth != 10 {
		t.Fatalf("stats %+v exceed max bytes %d", st, cfg.MaxBytes)
	}
	// A multi-event call that does not fit stores nothing.
	if err := s.Append(context.Background(), newEvent(KindAgent, "x-1")); !errors.Is(err, ErrFull) {
		t.Fatalf("Append when full = %v, want ErrFull", err)
	}

	snd := &fakeSender{}
	s.SetSender(snd)
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	got := snd.delivered("")
	if !testkit.SameSet(got, accepted) {
		t.Fatalf("delivered %v, want exactly the accepted %v", got, accepted)
	}
	testkit.WaitFor(t, "bytes released", func() bool { return s.Stats().Bytes == 0 })
	// Space is free again.
	mustAppend(t, s, newEvent(KindAgent, "after"), newEvent(KindAgent, "after2"))
}

func TestAppendLargerThanMax(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBytes = 64
	s := openTest(t, cfg)
	ev := newEvent(KindAgent, "big")
	ev.Body = make([]byte, 100)
	if err := s.Append(context.Background(), ev); !errors.Is(err, ErrFull) {
		t.Fatalf("Append = %v, want ErrFull", err)
	}
}

func TestAppendCancelledContext(t *testing.T) {
	s := openTest(t, testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Append(ctx, newEvent(KindWake, "c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v, want context.Canceled", err)
	}
	if st := s.Stats(); st.Depth != 0 || st.Bytes != 0 || st.Commits != 0 {
		t.Fatalf("a cancelled Append left %+v", st)
	}
}

// TestGroupCommit: appends queued while a commit is being written share
// the next one. A write transaction the test holds keeps the committer
// waiting until every writer has queued its append; then the appends the
// committer took before it blocked commit together, and all the others in
// one more commit.
func TestGroupCommit(t *testing.T) {
	s := openTest(t, testConfig(t))
	const writers = 32
	hold, err := s.db.Begin(true) // the committer's next transaction waits for it
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			if err := s.Append(context.Background(), newEvent(KindAgent, fmt.Sprintf("g%d", g))); err != nil {
				t.Error(err)
			}
		})
	}
	// every append is queued (or in the committer's hands): its writer
	// waits for the outcome
	testkit.WaitFor(t, "every writer to queue its append", func() bool { return waitingAppends() == writers })
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st := s.Stats()
	if st.Appended != writers || st.Depth != writers {
		t.Fatalf("stats %+v, want %d appended", st, writers)
	}
	if st.Commits > 2 {
		t.Fatalf("%d commits for %d appends queued behind one commit, want at most 2", st.Commits, st.Appended)
	}
}

// waitingAppends counts the goroutines blocked in Append waiting for the
// committer's verdict on their events.
func waitingAppends() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[chan receive") && strings.HasPrefix(frames, "github.com/caddyhook/caddyhook/caddyhook/spool.(*Store).Append(") {
			count++
		}
	}
	return count
}

func TestWriteErrorIsReportedNotLost(t *testing.T) {
	cfg := testConfig(t)
	core, logs := observer.New(zapcore.ErrorLevel)
	s, err := open(cfg, zap.New(core), openOptions{tune: func(o *bolt.Options) { o.MaxSize = 256 << 10 }}) // a "disk" of 256 KiB
	if err != nil {
		t.Fatal(err)
	}
	var accepted []string
	var writeErr error
	for i := 0; writeErr == nil && i < 1000; i++ {
		ev := newEvent(KindAgent, fmt.Sprint("f", i))
		ev.Body = make([]byte, 4096)
		if writeErr = s.Append(context.Background(), ev); writeErr == nil {
			accepted = append(accepted, ev.ID)
		}
	}
	if writeErr == nil || errors.Is(writeErr, ErrFull) {
		t.Fatalf("Append on a full disk = %v, want a write error", writeErr)
	}
	t.Logf("%d accepted, then: %v", len(accepted), writeErr)
	if logs.FilterMessage("spool: commit failed").Len() == 0 {
		t.Fatal("write error not logged")
	}
	st := s.Stats()
	if st.Depth != len(accepted) || st.Bytes > int64(len(accepted))*5000 {
		t.Fatalf("stats %+v after %d accepted: a failed append was counted", st, len(accepted))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openTest(t, cfg)
	snd := &fakeSender{}
	s2.SetSender(snd)
	testkit.WaitFor(t, "drain", func() bool { return s2.Stats().Depth == 0 })
	if got := snd.delivered(""); !testkit.SameSet(got, accepted) {
		t.Fatalf("after reopen delivered %d, want the %d accepted", len(got), len(accepted))
	}
}
