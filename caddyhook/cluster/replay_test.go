package cluster_test

import (
	"context"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/promtest"
)

// replaysOf reads caddy_hooks_cluster_replays_total{kind} of m.
func replaysOf(t *testing.T, m *cluster.Metrics, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	v, _ := promtest.Value(reg, "caddy_hooks_cluster_replays_total", "kind", kind)
	return v
}

// replayNodes starts n lockout nodes with a short failure window and
// clock skew (so that a sender goes quiet, and records go stale, within
// seconds), the second counting on m.
func replayNodes(t *testing.T, srv *natstest.Server, n, limit int, m *cluster.Metrics) []*table {
	t.Helper()
	urls := proxiedURLs(t, srv, n)
	var nodes []*table
	for i := range n {
		be := openBackend(t, urls(i), "replay", nil)
		natstest.WaitFor(t, "backend up", be.Up)
		tb := newTable(limit)
		tb.b = be
		opt := cluster.LockSyncOptions{LockTTL: time.Minute, Window: time.Second, ClockSkew: 100 * time.Millisecond}
		if i == 1 {
			opt.Metrics = m
		}
		tb.sync = cluster.NewLockSync(be, tb, opt)
		if err := tb.sync.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tb.sync.Close)
		nodes = append(nodes, tb)
	}
	waitMembers(t, nodes)
	return nodes
}

// addrOwnedBy returns an address whose count n owns.
func addrOwnedBy(t *testing.T, n *table) cluster.Addr {
	t.Helper()
	for i := range 1000 {
		a := cluster.Addr{10: 0xff, 11: 0xff, 12: 198, 13: 51, 14: byte(i >> 8), 15: byte(i)}
		if n.sync.Owns(a) {
			return a
		}
	}
	t.Fatal("no address owned by the node")
	return cluster.Addr{}
}

// TestLockoutReplayedBatchesAfterTheSenderWentQuiet (issue 34 B5):
// batches of failures recorded off the wire and published again after
// their sender went quiet (and the owner forgot it) are dropped and
// counted; before, their failures were clamped into the window and
// counted again, locking an address that never reached the limit.
func TestLockoutReplayedBatchesAfterTheSenderWentQuiet(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, _ := cluster.NewMetrics(nil)
	const limit = 5
	nodes := replayNodes(t, srv, 3, limit, m)
	a, b, c := nodes[0], nodes[1], nodes[2]
	addr := addrOwnedBy(t, b)

	// the recorder: every batch sent to b's inbox
	nc, _ := natstest.PlainClient(t, srv.URL())
	var mu sync.Mutex
	var recorded []*nats.Msg
	sub, err := nc.Subscribe("hooks.replay."+b.sync.Inbox(), func(msg *nats.Msg) {
		mu.Lock()
		recorded = append(recorded, msg)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = nc.Flush()

	for evaluated := 0; evaluated < limit-1; { // one short of the limit
		if a.guess(addr, time.Now()) {
			evaluated++
		}
		settled(t, nodes)
	}
	natstest.WaitFor(t, "the owner counted them", func() bool { return b.count(addr) == limit-1 })
	mu.Lock()
	batches := append([]*nats.Msg(nil), recorded...)
	mu.Unlock()
	if len(batches) == 0 {
		t.Fatal("no batch recorded")
	}
	a.sync.Close()              // the sender goes quiet
	time.Sleep(2 * time.Second) // past the window (1 s) and twice the skew
	// another node's batch to the owner: the owner forgets the quiet sender
	other := cluster.Addr{10: 0xff, 11: 0xff, 12: 203, 13: 0, 14: 113, 15: 9}
	for !b.sync.Owns(other) {
		other[15]++
	}
	c.guess(other, time.Now())
	natstest.WaitFor(t, "the other batch folded", func() bool { return b.count(other) == 1 })

	for range 3 {
		for _, msg := range batches {
			if err := nc.Publish(msg.Subject, msg.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = nc.Flush()
	natstest.WaitFor(t, "the replayed batches dropped and counted (or folded in)", func() bool {
		return replaysOf(t, m, cluster.ReplayedFailures) >= float64(limit-1) || b.count(addr) >= limit
	})
	if b.locked(addr) || b.count(addr) != limit-1 {
		t.Errorf("after the replay the owner counts %d failures of the address (locked: %v); want %d, unlocked", b.count(addr), b.locked(addr), limit-1)
	}
}

// TestLockRecordWrittenBackAfterALift (issue 34 B5): a lock record
// recorded from the bucket and written back after the operator lifted
// the lock on every node does not lock the address again (it is dropped
// as a replay and counted); a lock made now still reaches every node.
func TestLockRecordWrittenBackAfterALift(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, _ := cluster.NewMetrics(nil)
	const limit = 3
	nodes := replayNodes(t, srv, 2, limit, m)
	a, b := nodes[0], nodes[1]
	addr := addrOwnedBy(t, a)
	for !a.locked(addr) {
		a.guess(addr, time.Now())
	}
	_, js := natstest.PlainClient(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "hooks_replay_locks")
	if err != nil {
		t.Fatal(err)
	}
	key := hex.EncodeToString(addr[:])
	var recorded []byte
	natstest.WaitFor(t, "the lock record in the bucket", func() bool {
		e, err := kv.Get(ctx, key)
		if err == nil {
			recorded = e.Value()
		}
		return err == nil
	})
	natstest.WaitFor(t, "the lock on both nodes", func() bool { return allLocked([]*table{a, b}, addr) })
	for _, n := range []*table{a, b} { // the operator lifts it on every node
		n.mu.Lock()
		delete(n.until, addr)
		n.counts[addr] = 0
		n.mu.Unlock()
	}
	before := replaysOf(t, m, cluster.ReplayedLock)
	time.Sleep(cluster.FreshWindow(100*time.Millisecond, time.Second) + 200*time.Millisecond)
	if _, err := kv.Put(ctx, key, recorded); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, "the record written back dropped (or applied)", func() bool {
		return replaysOf(t, m, cluster.ReplayedLock) > before || b.locked(addr)
	})
	if b.locked(addr) {
		t.Error("a lock record written back after the lift locked the address again")
	}
	// a lock made now reaches the other node
	other := addrOwnedBy(t, b)
	for !b.locked(other) {
		b.guess(other, time.Now())
	}
	natstest.WaitFor(t, "a fresh lock applied on the other node", func() bool { return a.locked(other) })
}
