package cluster_test

import (
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/cluster/natscluster"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// testSigningKey is the signing key of the test nodes.
const testSigningKey = "cluster-test-signing-key-0f1e2d3c4b5a69788796a5b4"

// openBackend connects one node (its own pool entry: each node passes
// its own URL list or order).
func openBackend(t *testing.T, urls []string, name string, q *cluster.QueueParams) cluster.Backend {
	t.Helper()
	eng, err := natscluster.New(natscluster.Config{URLs: urls, Timeout: caddy.Duration(time.Second), SigningKeys: []string{testSigningKey},
		AckWait: caddy.Duration(2 * time.Second)}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := eng.Open(cluster.Params{Name: name, LockTTL: time.Minute, IdempotencyTTL: time.Minute, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Cleanup() })
	return b
}

// table is a minimal lockout table: limit failures lock an address for a
// minute. It stands in for the handler's table, which implements the same
// LockTarget methods.
type table struct {
	mu     sync.Mutex
	limit  int
	counts map[cluster.Addr]int
	until  map[cluster.Addr]time.Time
	folded int
	sync   *cluster.LockSync
	b      cluster.Backend
}

func newTable(limit int) *table {
	return &table{limit: limit, counts: map[cluster.Addr]int{}, until: map[cluster.Addr]time.Time{}}
}

// guess is one request with a wrong token: refused unevaluated while the
// address is locked or held back, else shared and counted, as the
// handler's table does: the lock check, the sharing and the count under
// the table's lock, so that a lock folded in meanwhile (from another
// node's failure) refuses it, as the handler answers 429 then.
func (t *table) guess(a cluster.Addr, now time.Time) (evaluated bool) {
	t.mu.Lock()
	if now.Before(t.until[a]) || t.sync.Held(a) || !t.sync.Failure(a, now) {
		t.mu.Unlock()
		return false
	}
	t.counts[a]++
	var locked time.Time
	if t.counts[a] >= t.limit {
		locked = now.Add(time.Minute)
		t.until[a] = locked
	}
	t.mu.Unlock()
	if !locked.IsZero() {
		t.sync.Locked(a, locked)
	}
	return true
}

func (t *table) locked(a cluster.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Now().Before(t.until[a])
}

func (t *table) count(a cluster.Addr) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counts[a]
}

// FoldFailure implements cluster.LockTarget: a failure of a locked
// address is not counted.
func (t *table) FoldFailure(a cluster.Addr, at time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.folded++
	if until := t.until[a]; at.Before(until) {
		return until, false
	}
	t.counts[a]++
	if t.counts[a] >= t.limit {
		t.until[a] = at.Add(time.Minute)
		return t.until[a], true
	}
	return time.Time{}, false
}

// ApplyLock implements cluster.LockTarget.
func (t *table) ApplyLock(a cluster.Addr, until time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !until.After(t.until[a]) {
		return false
	}
	t.until[a] = until
	return true
}

// waitMembers waits until every node sees all of them as members.
func waitMembers(t *testing.T, nodes []*table) {
	t.Helper()
	syncs := make([]testkit.Memberer, len(nodes))
	for i, n := range nodes {
		syncs[i] = n.sync
	}
	testkit.WaitMembers(t, len(nodes), syncs...)
}

// owner returns the node owning a's count (every node agrees once the
// members are settled).
func owner(t *testing.T, nodes []*table, a cluster.Addr) *table {
	t.Helper()
	var o *table
	for _, n := range nodes {
		if n.sync.Owns(a) {
			if o != nil {
				t.Fatalf("two nodes own %x", a)
			}
			o = n
		}
	}
	if o == nil {
		t.Fatalf("no node owns %x", a)
	}
	return o
}

// settled waits until no node has a failure unconfirmed by its owner.
func settled(t *testing.T, nodes []*table) {
	t.Helper()
	natstest.WaitFor(t, "every failure confirmed by its owner", func() bool {
		for _, n := range nodes {
			if n.sync.Pending() != 0 {
				return false
			}
		}
		return true
	})
}
