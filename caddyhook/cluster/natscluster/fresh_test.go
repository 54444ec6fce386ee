package natscluster

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/promtest"
	"github.com/caddyhook/caddyhook/internal/version"
)

// metricsOf is a cluster.Metrics that also counts the records kept
// unread, and a registry to read both from.
func metricsOf(t *testing.T) (*cluster.Metrics, *prometheus.Registry) {
	t.Helper()
	m, _ := cluster.NewMetrics(nil)
	u := version.NewUnreadable()
	m.SetUnreadable(u)
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(u.Collector())
	return m, reg
}

// counter reads a counter of reg (0 when absent).
func counter(reg prometheus.Gatherer, name string, labels ...string) float64 {
	v, _ := promtest.Value(reg, name, labels...)
	return v
}

// fastFresh are settings under which a bucket value goes stale within
// about two seconds (cluster.FreshWindow).
func fastFresh(c *Config) {
	c.ClockSkew = caddy.Duration(100 * time.Millisecond)
	c.Timeout = caddy.Duration(time.Second)
}

// freshWait is how long to wait before a recorded value written back is
// a replay under fastFresh.
var freshWait = cluster.FreshWindow(100*time.Millisecond, time.Second) + 200*time.Millisecond

// TestOutcomeMessageReplayedIsReadOnce (issue 34 B1): a sealed outcome
// message recorded off the wire and published again many times is read
// once by the other nodes; each replay is dropped and counted. Before,
// every replay was applied (and grew the event log's early buffer).
func TestOutcomeMessageReplayedIsReadOnce(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, reg := metricsOf(t)
	pub := openNode(t, []string{srv.URL()}, "outreplay", nil, nil)
	p := natstest.NewProxy(t, srv.Addr())
	sub := openNodeMetrics(t, []string{p.URL()}, "outreplay", nil, nil, m)
	natstest.WaitFor(t, "up", func() bool { return pub.b.Up() && sub.b.Up() })
	nc, _ := natstest.PlainClient(t, srv.URL())
	var mu sync.Mutex
	var recorded [][]byte
	rs, err := nc.Subscribe("hooks.outreplay.outcome", func(msg *nats.Msg) {
		mu.Lock()
		recorded = append(recorded, msg.Data)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Unsubscribe()
	_ = nc.Flush()
	var got atomic.Int64
	stop, err := sub.b.(cluster.Outcomes).SubscribeOutcomes(func(cluster.OutcomeBatch) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	b := cluster.OutcomeBatch{Node: pub.b.Node(), Time: time.Now(), Items: []cluster.Outcome{{ID: "ev-1", State: eventlog.StateDelivered, Attempts: 1, GatewayStatus: 200}}}
	if err := pub.b.(cluster.Outcomes).PublishOutcomes(b); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, "the outcome read and recorded", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got.Load() == 1 && len(recorded) == 1
	})
	mu.Lock()
	message := recorded[0] // the recording subscription keeps appending the replays
	mu.Unlock()
	const replays = 1000
	for range replays {
		if err := nc.Publish("hooks.outreplay.outcome", message); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	natstest.WaitFor(t, "the replays dropped (or read)", func() bool {
		return counter(reg, "caddy_hooks_cluster_replays_total", "kind", cluster.ReplayedOutcome) == replays || got.Load() > 1
	})
	if n := got.Load(); n != 1 {
		t.Errorf("the outcome was read %d times, want once", n)
	}
}

// TestLeaseWrittenBackHoldsNothing (issue 34, sealed records carry
// freshness): the wake lane's lease recorded while a node held it and
// written back after that node released it does not keep the other
// delivery nodes from taking the lane.
func TestLeaseWrittenBackHoldsNothing(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, reg := metricsOf(t)
	a := openNode(t, []string{srv.URL()}, "leasereplay", queueParams(), fastFresh)
	p := natstest.NewProxy(t, srv.Addr())
	b := openNodeMetrics(t, []string{p.URL()}, "leasereplay", queueParams(), fastFresh, m)
	natstest.WaitFor(t, "up", func() bool { return a.b.Up() && b.b.Up() })
	ctx := ctxT(t)
	qa, qb := a.b.(*handle).queue, b.b.(*handle).queue
	natstest.WaitFor(t, "both provisioned", func() bool { return qa.lanes.Load() != nil && qb.lanes.Load() != nil })
	la, _, err := qa.tryLease(ctx)
	if err != nil || la == nil {
		t.Fatalf("a takes the lease: %v %v", la, err)
	}
	_, js := natstest.PlainClient(t, srv.URL())
	kv, err := js.KeyValue(ctx, "hooks_leasereplay_lanes")
	if err != nil {
		t.Fatal(err)
	}
	held, err := kv.Get(ctx, leaseKey)
	if err != nil {
		t.Fatal(err)
	}
	if lb, _, _ := qb.tryLease(ctx); lb != nil {
		t.Fatal("b took the lease a holds")
	}
	la.release()
	time.Sleep(freshWait)
	if _, err := kv.Put(ctx, leaseKey, held.Value()); err != nil { // a's "held" written back
		t.Fatal(err)
	}
	lb, _, err := qb.tryLease(ctx)
	if err != nil || lb == nil {
		t.Fatalf("b could not take the lease after a's record was written back: %v", err)
	}
	if n := counter(reg, "caddy_hooks_cluster_replays_total", "kind", cluster.ReplayedLease); n != 1 {
		t.Errorf("replayed leases counted %v, want 1", n)
	}
}

// TestClaimWrittenBackIsTakenOver (issue 34): a pending idempotency
// claim recorded from the bucket and written back after its claimer
// released the key does not make the key busy: the next request claims
// it at once.
func TestClaimWrittenBackIsTakenOver(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, reg := metricsOf(t)
	a := openNode(t, []string{srv.URL()}, "claimreplay", nil, fastFresh)
	p := natstest.NewProxy(t, srv.Addr())
	b := openNodeMetrics(t, []string{p.URL()}, "claimreplay", nil, fastFresh, m)
	natstest.WaitFor(t, "up", func() bool { return a.b.Up() && b.b.Up() })
	ctx := ctxT(t)
	sum := sha256.Sum256([]byte("replayed key"))
	key := hex.EncodeToString(sum[:])
	if _, claimed, err := a.b.Claims().Claim(ctx, key, time.Now().Add(time.Hour)); err != nil || !claimed {
		t.Fatalf("a claims: %v %v", claimed, err)
	}
	_, js := natstest.PlainClient(t, srv.URL())
	kv, err := js.KeyValue(ctx, "hooks_claimreplay_idem")
	if err != nil {
		t.Fatal(err)
	}
	pending, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.b.Claims().Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	time.Sleep(freshWait)
	if _, err := kv.Put(ctx, key, pending.Value()); err != nil {
		t.Fatal(err)
	}
	rec, claimed, err := b.b.Claims().Claim(ctx, key, time.Now().Add(time.Minute))
	if err != nil || !claimed {
		t.Fatalf("b: %+v claimed %v, %v; want the written-back claim taken over", rec, claimed, err)
	}
	if n := counter(reg, "caddy_hooks_cluster_replays_total", "kind", cluster.ReplayedIdempotency); n < 1 {
		t.Errorf("replayed idempotency records counted %v, want at least 1", n)
	}
}

// levelOf makes a node run at cluster level l (an older node: 0).
func levelOf(l int) func(*Config) { return func(c *Config) { c.level = &l } }

// membersOf starts the lockout membership of n (as a node's LockSync
// does), which tells the gate the others' levels.
func membersOf(t *testing.T, n *node) *cluster.Members {
	t.Helper()
	ms := cluster.NewMembers(n.b, cluster.TopicLockout, 100*time.Millisecond, nil)
	if err := ms.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ms.Close)
	return ms
}
