package caddyhook

import (
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestLogBudget(t *testing.T) {
	var b logBudget
	t0 := time.Unix(1_700_000_000, 0)
	for i := range rejectLogsPerSecond {
		if ok, sup := b.allow(t0.Add(time.Duration(i) * time.Millisecond)); !ok || sup != 0 {
			t.Fatalf("line %d: ok=%v suppressed=%d", i, ok, sup)
		}
	}
	for i := range 5 {
		if ok, _ := b.allow(t0.Add(999 * time.Millisecond)); ok {
			t.Fatalf("line %d over the budget was allowed", rejectLogsPerSecond+i)
		}
	}
	if ok, sup := b.allow(t0.Add(time.Second)); !ok || sup != 5 {
		t.Fatalf("next second: ok=%v suppressed=%d, want true and 5", ok, sup)
	}
	if ok, sup := b.allow(t0.Add(time.Second)); !ok || sup != 0 {
		t.Fatalf("after reporting: ok=%v suppressed=%d, want true and 0", ok, sup)
	}
	var none *logBudget
	for range 3 * rejectLogsPerSecond {
		if ok, _ := none.allow(t0); !ok {
			t.Fatal("a nil budget refused a line")
		}
	}
}

// TestLogBudgetConcurrent checks the bound holds under concurrent callers.
func TestLogBudgetConcurrent(t *testing.T) {
	var b logBudget
	now := time.Unix(1_700_000_000, 0)
	b.allow(now) // settle the second first
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 1
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if ok, _ := b.allow(now); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != rejectLogsPerSecond {
		t.Fatalf("%d lines allowed in one second, want %d", allowed, rejectLogsPerSecond)
	}
}

// TestLogRejectionIsBounded floods the rejection log within one second and
// checks the lines written, then the suppressed count on the next one.
func TestLogRejectionIsBounded(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := &rejectionLog{logger: zap.New(core)}
	now := time.Unix(1_700_000_000, 0)
	ex := &exchange{ip: netip.MustParseAddr("192.0.2.7"), now: now, route: "none"}
	herr := reject(http.StatusUnauthorized, "invalid or missing token")
	for range 100 {
		l.write(ex, herr)
	}
	if n := logs.Len(); n != rejectLogsPerSecond {
		t.Fatalf("%d lines for 100 rejections in one second, want %d", n, rejectLogsPerSecond)
	}
	ex.now = now.Add(time.Second)
	l.write(ex, herr)
	last := logs.All()[logs.Len()-1].ContextMap()
	if last["suppressed"] != uint64(100-rejectLogsPerSecond) || last["status"] != int64(401) {
		t.Fatalf("next line: %v, want suppressed=%d", last, 100-rejectLogsPerSecond)
	}
}
