package natscluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/loopstore"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// stalledCluster is a three-server cluster whose stores are loop-mounted
// filesystems the test can freeze, with a node connected to each server.
type stalledCluster struct {
	c      *natstest.Cluster
	stores []*loopstore.Store
	nodes  []*node
}

// runStalledCluster starts it (root only: see loopstore.Require); the
// stores are thawed before the servers stop.
func runStalledCluster(t *testing.T, name string) *stalledCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("3-node cluster on loop-mounted stores; run without -short")
	}
	loopstore.Require(t)
	sc := &stalledCluster{}
	var dirs []string
	for range 3 {
		s := loopstore.New(t, 128<<20)
		sc.stores = append(sc.stores, s)
		dirs = append(dirs, s.Dir)
	}
	sc.c = natstest.RunClusterStores(t, dirs)
	t.Cleanup(func() { // runs before the servers stop
		for _, s := range sc.stores {
			_ = s.Thaw()
		}
	})
	r3 := func(c *Config) { c.Replicas = 3 }
	for _, s := range sc.c.Servers {
		sc.nodes = append(sc.nodes, openNode(t, []string{s.URL()}, name, queueParams(), r3))
	}
	natstest.WaitFor(t, "nodes up", func() bool {
		for _, n := range sc.nodes {
			if !n.b.Up() {
				return false
			}
		}
		return true
	})
	return sc
}

// leader is the index of the server leading stream, among those not in
// skip, or -1 (asked without waiting on a server that may be stuck).
func (sc *stalledCluster) leader(stream string, skip int) int {
	for i, s := range sc.c.Servers {
		if i == skip {
			continue
		}
		r := make(chan bool, 1)
		go func() { r <- s.JetStreamIsStreamLeader("$G", stream) }()
		select {
		case l := <-r:
			if l {
				return i
			}
		case <-time.After(time.Second):
		}
	}
	return -1
}

// moveLeader asks the leader of stream to step down until a server
// other than from leads it.
func (sc *stalledCluster) moveLeader(t *testing.T, stream string, from int) {
	t.Helper()
	nc, _ := natstest.PlainClient(t, sc.c.Servers[(from+1)%3].URL())
	natstest.WaitFor(t, "another leader of "+stream, func() bool {
		if l := sc.leader(stream, -1); l != from {
			return l >= 0
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 2*time.Second)
		time.Sleep(100 * time.Millisecond) // the election
		return false
	})
}

// load writes into the bucket through every server from when start
// closes until stop closes: what a stalled leader needs to lose its
// leadership (an idle one keeps it: its heartbeats go on). Its clients
// are connected when it returns.
func (sc *stalledCluster) load(t *testing.T, bucket string, start, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i, s := range sc.c.Servers {
		_, js := natstest.PlainClient(t, s.URL())
		kv, err := js.KeyValue(ctxT(t), bucket)
		if err != nil {
			t.Fatal(err)
		}
		for g := range 4 {
			wg.Go(func() {
				select {
				case <-start:
				case <-stop:
					return
				}
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, _ = kv.Put(ctx, fmt.Sprintf("load-%d-%d-%d", i, g, k), []byte("x"))
					cancel()
				}
			})
		}
	}
	return &wg
}

// TestSettleWhileBucketLeaderStalled (issue 34 item 2): the idempotency
// bucket's leader stalls (its store frozen, as a hung disk does). The
// other two servers elect a new leader, but the stalled one does not
// learn it until its store comes back and goes on answering: a write
// with an expected revision of a key that has another write in flight
// there is refused at once with "wrong last sequence" (10164), and that
// refusal reaches the client before the new leader's acceptance of the
// same write. The test shows it with a plain client (the update is
// refused, and stored), then that claims settled meanwhile are stored and
// read by another node: one made before the stall, and one made under the
// new leader, whose create the old one took in too, so that it refuses
// the settle (on main before issue 34 Settle failed with that 10164 and
// the claim stayed pending until its lease lapsed); and that the nodes
// take events (a stalled bucket makes claims fall back to each node's own
// cache; it does not turn events away).
func TestSettleWhileBucketLeaderStalled(t *testing.T) {
	sc := runStalledCluster(t, "stall")
	bucket := "hooks_stall_idem"
	stream := "KV_" + bucket
	var stalled int
	natstest.WaitFor(t, "a bucket leader", func() bool { stalled = sc.leader(stream, -1); return stalled >= 0 })
	// only the bucket: the queue is led elsewhere
	sc.moveLeader(t, "HOOKS_stall_QUEUE", stalled)
	// the nodes on the other servers: a settles, b waits
	a, b := sc.nodes[(stalled+1)%3], sc.nodes[(stalled+2)%3]
	opt := cluster.IdempotencyOptions{Lease: time.Minute, Wait: time.Minute, Timeout: 2 * time.Second}
	_, claim, err := cluster.NewIdempotency(a.b.Claims(), opt).Acquire(ctxT(t), "claimed-before")
	if err != nil || claim == nil {
		t.Fatalf("claim: %v %v", claim, err)
	}

	// The store freezes while the bucket is idle (the claim above is
	// applied: its create was acknowledged), and the writes start after.
	// The first write then reaches the leader's Raft log, whose append
	// blocks the leader's Raft loop: its heartbeats stop and the other two
	// elect a new leader. (With writes running at the freeze, the leader
	// may block first applying a committed one, holding the stream's lock:
	// no write reaches its Raft loop, whose heartbeats go on, and NATS
	// keeps it as the leader for the whole stall.)
	start, stop := make(chan struct{}), make(chan struct{})
	wg := sc.load(t, bucket, start, stop)
	defer func() { close(stop); wg.Wait() }()
	if err := sc.stores[stalled].Freeze(time.Minute); err != nil {
		t.Fatal(err)
	}
	close(start)
	var leader int
	metaStalled := sc.c.Servers[stalled].JetStreamIsLeader()
	deadline := time.Now().Add(natstest.WaitTimeout)
	for leader = sc.leader(stream, stalled); leader < 0; leader = sc.leader(stream, stalled) {
		if time.Now().After(deadline) {
			for i, s := range sc.c.Servers {
				if i == stalled {
					continue
				}
				if j, err := s.Jsz(&server.JSzOptions{Streams: true, Accounts: true}); err == nil {
					for _, a := range j.AccountDetails {
						for _, sd := range a.Streams {
							if sd.Cluster != nil {
								t.Logf("%s sees %s: leader %s %+v", s.Name(), sd.Name, sd.Cluster.Leader, sd.Cluster.Replicas)
							}
						}
					}
				}
			}
			t.Fatalf("no new bucket leader within %s (stalled: %s, meta leader too: %v)", natstest.WaitTimeout, sc.c.Servers[stalled].Name(), metaStalled)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}

	// the refusal, with a plain client on the new leader's server
	_, js := natstest.PlainClient(t, sc.c.Servers[leader].URL())
	kv, err := js.KeyValue(ctxT(t), bucket)
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for k := 0; k < 20 && !refused; k++ {
		key := fmt.Sprintf("raw%d", k)
		ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
		rev, err := kv.Create(ctx, key, []byte("claim"))
		if err == nil {
			_, err = kv.Update(ctx, key, []byte("settled"), rev)
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant {
				refused = true
				natstest.WaitFor(t, "the refused update read back", func() bool {
					e, err := kv.Get(ctx, key)
					return err == nil && string(e.Value()) == "settled"
				})
				t.Logf("update of %s answered %v, and stored", key, err)
			}
		}
		cancel()
	}
	if !refused {
		t.Fatal("no update was refused with 10164 while the old leader stalled: the fault was not reproduced")
	}

	// a claim made before the stall and one made under the new leader
	// (whose create the old one took in too: its settle is refused by it)
	// are settled, and read by b
	_, during, err := cluster.NewIdempotency(a.b.Claims(), opt).Acquire(ctxT(t), "claimed-during")
	if err != nil || during == nil {
		t.Fatalf("claim under the new leader: %v %v", during, err)
	}
	for _, c := range []struct {
		key   string
		claim *cluster.Claim
	}{{"claimed-before", claim}, {"claimed-during", during}} {
		reply := `{"ok":true,"runId":"` + c.key + `"}`
		if err := c.claim.Settle(200, []byte(reply)); err != nil {
			t.Errorf("settle of %s while the old leader stalls: %v", c.key, err)
		}
		rep, cl, err := cluster.NewIdempotency(b.b.Claims(), opt).Acquire(ctxT(t), c.key)
		if err != nil || cl != nil || rep == nil || string(rep.Body) != reply {
			t.Errorf("replay of %s on another node: %+v %v %v, want the settled reply", c.key, rep, cl, err)
		}
	}
	// (the stalled server is a replica of the queue too: the queue's
	// leader may hold up a publish while it stops hearing from it)
	for i, n := range sc.nodes {
		if i == stalled {
			continue
		}
		natstest.WaitFor(t, fmt.Sprintf("a publish through server %d", i), func() bool {
			return n.b.Up() && n.b.Queue().Publish(ctxT(t), natstest.Events(fmt.Sprintf("q%d", i), spool.KindAgent, 1)...) == nil
		})
	}
}

// TestRedundancyFollowsAFullDisk (issue 34 item 4): a server's disk fills
// up, which disables JetStream on it until it restarts. The nodes stay up
// (the other two hold the quorum), and their redundancy says what is
// lost: the streams with a replica there have one current replica fewer
// than configured, and the namespace is degraded.
func TestRedundancyFollowsAFullDisk(t *testing.T) {
	sc := runStalledCluster(t, "full")
	n := sc.nodes[0]
	natstest.WaitFor(t, "every replica current", func() bool {
		r := n.b.(cluster.Redundant).Redundancy()
		return !r.Read.IsZero() && !r.Degraded() && len(r.Streams) == 5
	})
	full := 2 // a server none of the nodes below writes through
	if _, err := sc.stores[full].Fill(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // writes, so that the full server fails one
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = n.b.Queue().Publish(ctxT(t), natstest.Events(fmt.Sprintf("full%d", k), spool.KindAgent, 1)...)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	name := sc.c.Servers[full].Name()
	natstest.WaitFor(t, "the queue one replica short", func() bool {
		r := n.b.(cluster.Redundant).Redundancy()
		for _, s := range r.Streams {
			if s.Name == "HOOKS_full_QUEUE" {
				return r.Degraded() && s.Replicas == 3 && s.Current == 2 && slices.Equal(s.Lagging, []string{name})
			}
		}
		return false
	})
	t.Logf("JetStream on the full server: %v", sc.c.Servers[full].JetStreamEnabled())
	if !n.b.Up() {
		t.Error("the node is down while two of three servers serve")
	}
	t.Logf("redundancy with a full disk: %+v", n.b.(cluster.Redundant).Redundancy())
}
