package idempotency

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// mustLead claims key and fails unless the caller became the leader.
func mustLead(t *testing.T, c *Cache, key string, now time.Time) *Claim {
	t.Helper()
	rep, cl, err := c.Claim(context.Background(), key, now)
	if err != nil || cl == nil {
		t.Fatalf("claim(%q): leader expected, got reply %+v err %v", key, rep, err)
	}
	return cl
}

// mustReplay claims key and fails unless a cached reply came back.
func mustReplay(t *testing.T, c *Cache, key string, now time.Time) Reply {
	t.Helper()
	rep, cl, err := c.Claim(context.Background(), key, now)
	if err != nil || cl != nil {
		t.Fatalf("claim(%q): replay expected, got claim=%v err=%v", key, cl != nil, err)
	}
	return rep
}

// checkIdemBounds verifies every shard's bounds and byte accounting.
func checkIdemBounds(t *testing.T, c *Cache) (entries int) {
	t.Helper()
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sum := 0
		for k, e := range sh.m {
			sum += e.size
			if e.size < len(k) {
				t.Errorf("shard %d: entry %q size %d below its key length", i, k, e.size)
			}
		}
		if len(sh.m) > entriesPerShard {
			t.Errorf("shard %d holds %d entries > %d", i, len(sh.m), entriesPerShard)
		}
		if sh.bytes > bytesPerShard {
			t.Errorf("shard %d holds %d bytes > %d", i, sh.bytes, bytesPerShard)
		}
		if sh.bytes != sum {
			t.Errorf("shard %d accounts %d bytes, entries hold %d", i, sh.bytes, sum)
		}
		entries += len(sh.m)
		sh.mu.Unlock()
	}
	return entries
}

func TestIdemReplay(t *testing.T) {
	c := New(time.Minute)
	cl := mustLead(t, c, "k1", t0)
	body := []byte(`{"ok":true,"runId":"r1"}`)
	c.Settle(cl, Reply{Status: 200, Body: body}, true, t0)
	copy(body, "XXXX") // the cache must hold its own copy
	for i := range 3 {
		rep := mustReplay(t, c, "k1", t0.Add(time.Duration(i)*time.Second))
		if rep.Status != 200 || string(rep.Body) != `{"ok":true,"runId":"r1"}` {
			t.Fatalf("replay %d = %d %s", i, rep.Status, rep.Body)
		}
	}
	mustLead(t, c, "k2", t0) // other keys are independent
}

func TestIdemTTL(t *testing.T) {
	c := New(time.Minute)
	c.Settle(mustLead(t, c, "k", t0), Reply{Status: 200, Body: []byte(`{}`)}, true, t0)
	for _, tc := range []struct {
		at     time.Duration
		replay bool
	}{{0, true}, {59 * time.Second, true}, {time.Minute - time.Nanosecond, true}, {time.Minute, false}} {
		_, cl, err := c.Claim(context.Background(), "k", t0.Add(tc.at))
		if err != nil {
			t.Fatal(err)
		}
		if (cl == nil) != tc.replay {
			t.Fatalf("at +%v: replay = %v, want %v", tc.at, cl == nil, tc.replay)
		}
		if cl != nil {
			c.Settle(cl, Reply{}, false, t0.Add(tc.at))
		}
	}
	if n := checkIdemBounds(t, c); n != 0 {
		t.Fatalf("%d entries left after expiry and failure", n)
	}
}

func TestIdemFailureForgets(t *testing.T) {
	c := New(time.Minute)
	c.Settle(mustLead(t, c, "k", t0), Reply{Status: 502}, false, t0)
	cl := mustLead(t, c, "k", t0.Add(time.Second))
	c.Settle(cl, Reply{Status: 200, Body: []byte(`{"runId":"second"}`)}, true, t0.Add(time.Second))
	if rep := mustReplay(t, c, "k", t0.Add(2*time.Second)); string(rep.Body) != `{"runId":"second"}` {
		t.Fatalf("replay = %s", rep.Body)
	}
}

// TestIdemConcurrentSameKey: callers that arrive while the leader
// dispatches wait for it and all get its reply; nobody dispatches twice.
// In a synctest bubble, synctest.Wait returns once every caller is
// blocked waiting for the leader: no sleep decides who arrives when.
func TestIdemConcurrentSameKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(time.Minute)
		leader := mustLead(t, c, "same", time.Now())
		const callers = 64
		var dispatches atomic.Int32
		replies := make(chan string, callers)
		for range callers {
			go func() {
				rep, cl, err := c.Claim(context.Background(), "same", time.Now())
				if err != nil {
					t.Error(err)
				}
				if cl != nil {
					dispatches.Add(1)
					c.Settle(cl, Reply{Status: 200, Body: []byte("second dispatch")}, true, time.Now())
				}
				replies <- string(rep.Body)
			}()
		}
		synctest.Wait() // every caller waits for the leader
		c.Settle(leader, Reply{Status: 200, Body: []byte(`{"runId":"run-1"}`)}, true, time.Now())
		for i := range callers {
			if r := <-replies; r != `{"runId":"run-1"}` {
				t.Fatalf("caller %d got %q", i, r)
			}
		}
		if n := dispatches.Load(); n != 0 {
			t.Fatalf("%d callers dispatched again, want 0", n)
		}
	})
}

// TestIdemLeaderFailureReleasesFollowers: when the leader fails, one
// waiting follower takes over and the others get its reply.
func TestIdemLeaderFailureReleasesFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(time.Minute)
		leader := mustLead(t, c, "k", t0)
		const followers = 16
		var dispatches atomic.Int32
		release := make(chan struct{}) // the new leader settles once the others wait
		replies := make(chan string, followers)
		for range followers {
			go func() {
				rep, cl, err := c.Claim(context.Background(), "k", t0)
				if err != nil {
					t.Error(err)
				}
				if cl != nil {
					dispatches.Add(1)
					<-release
					rep = Reply{Status: 200, Body: []byte("retried")}
					c.Settle(cl, rep, true, t0)
				}
				replies <- string(rep.Body)
			}()
		}
		synctest.Wait() // all followers wait for the leader
		c.Settle(leader, Reply{Status: 502}, false, t0)
		synctest.Wait() // one took over; the rest wait for it
		if n := dispatches.Load(); n != 1 {
			t.Fatalf("%d followers took over, want 1", n)
		}
		close(release)
		for i := range followers {
			if r := <-replies; r != "retried" {
				t.Fatalf("follower %d got %q", i, r)
			}
		}
	})
}

func TestIdemFollowerCancelled(t *testing.T) {
	c := New(time.Minute)
	leader := mustLead(t, c, "k", t0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, cl, err := c.Claim(ctx, "k", t0)
	if cl != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim = %v, %v; want context deadline", cl != nil, err)
	}
	c.Settle(leader, Reply{Status: 200, Body: []byte("x")}, true, t0)
	if rep := mustReplay(t, c, "k", t0); string(rep.Body) != "x" {
		t.Fatalf("replay %q", rep.Body)
	}
}

// keysInShard returns n distinct keys that land in the shard of first.
func keysInShard(c *Cache, first string, n int) []string {
	target := c.shardOf(first)
	out := []string{first}
	for i := 0; len(out) < n; i++ {
		if k := fmt.Sprintf("k-%d", i); k != first && c.shardOf(k) == target {
			out = append(out, k)
		}
	}
	return out
}

// TestIdemEvictedPendingEntry: a pending key pushed out by newer keys
// releases its followers, and the late settle of its leader is harmless.
func TestIdemEvictedPendingEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(time.Minute)
		keys := keysInShard(c, "pending", entriesPerShard+1)
		leader := mustLead(t, c, keys[0], t0)
		type result struct {
			lead bool
			err  error
		}
		done := make(chan result, 1)
		go func() {
			_, cl, err := c.Claim(context.Background(), keys[0], t0)
			done <- result{cl != nil, err}
		}()
		synctest.Wait() // the follower waits for the pending key
		for _, k := range keys[1:] {
			c.Settle(mustLead(t, c, k, t0), Reply{Status: 200, Body: []byte("{}")}, true, t0)
		}
		synctest.Wait()
		select {
		case r := <-done:
			if r.err != nil || !r.lead {
				t.Fatalf("released follower: lead=%v err=%v; want to lead", r.lead, r.err)
			}
		default:
			t.Fatal("follower of an evicted key still waiting")
		}
		c.Settle(leader, Reply{Status: 200, Body: []byte("late")}, true, t0) // must not panic
		checkIdemBounds(t, c)
	})
}

// TestIdemBoundedMemory inserts 200k keys: entry counts and bytes stay
// within the configured bounds and the accounting stays exact.
func TestIdemBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("400k insertions (over a minute under the race detector); the full run covers it")
	}
	for _, tc := range []struct {
		name     string
		bodySize int
	}{{"small replies", 64}, {"large replies", 8 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(time.Minute)
			body := make([]byte, tc.bodySize)
			for i := range 200_000 {
				key := fmt.Sprintf("idem-%d-%032d", i, i)
				c.Settle(mustLead(t, c, key, t0), Reply{Status: 200, Body: body}, true, t0)
			}
			n := checkIdemBounds(t, c)
			t.Logf("%d entries kept", n)
			if n > numShards*entriesPerShard {
				t.Fatalf("%d entries > %d", n, numShards*entriesPerShard)
			}
			if n == 0 {
				t.Fatal("nothing kept")
			}
			// the newest key is still answered
			mustReplay(t, c, fmt.Sprintf("idem-%d-%032d", 199_999, 199_999), t0)
		})
	}
}

// TestIdemAccountingUnderChurn mixes replays, failures, expiries and
// re-insertions of the same keys and checks the byte accounting.
func TestIdemAccountingUnderChurn(t *testing.T) {
	c := New(time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	for range 300_000 {
		now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
		key := fmt.Sprintf("churn-%d", rng.IntN(100_000))
		rep, cl, err := c.Claim(context.Background(), key, now)
		if err != nil {
			t.Fatal(err)
		}
		if cl == nil {
			if rep.Status != 200 {
				t.Fatalf("replay status %d", rep.Status)
			}
			continue
		}
		ok := rng.IntN(4) != 0
		c.Settle(cl, Reply{Status: 200, Body: make([]byte, rng.IntN(2048))}, ok, now)
	}
	checkIdemBounds(t, c)
}
