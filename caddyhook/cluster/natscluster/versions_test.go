package natscluster

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/caddyhook/spool/spooltest"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/version"
)

func TestRecordVersionsAgree(t *testing.T) {
	if recordVersion != version.IdempotencyRecord || leaseVersion != version.LeaseRecord {
		t.Errorf("idempotency v%d, lease v%d; internal/version says %d, %d", recordVersion, leaseVersion,
			version.IdempotencyRecord, version.LeaseRecord)
	}
}

// TestNewerRecordsKept: records a newer release wrote (a rollback) are
// kept where they are and counted once each in
// caddy_hooks_records_unreadable_total: a queued event stays in the queue
// (not delivered, not dead-lettered), a dead letter stays (not listed, not
// dropped with "all"), an idempotency record is neither answered from nor
// taken over, the wake lane's lease is not taken.
func TestNewerRecordsKept(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, reg := metricsOf(t)
	n := openNodeMetrics(t, []string{srv.URL()}, "newer", queueParams(), nil, m)
	natstest.WaitFor(t, "up", n.b.Up)
	s := n.b.(*handle).shared
	ctx := ctxT(t)
	_, js := natstest.PlainClient(t, srv.URL())
	newerEvent := append([]byte{9}, "a later release's record"...)

	// the queue and the dead letters
	for _, m := range []struct{ subject, kind, id string }{
		{s.n.queueAgent, sealQueue, "newer-queued"}, {s.n.dead, sealDead, "newer-dead"},
	} {
		msg := nats.NewMsg(m.subject)
		msg.Header.Set(jetstream.MsgIDHeader, m.id)
		msg.Data = s.seal(newerEvent, m.kind, m.subject)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	legit := natstest.Events("legit", spool.KindAgent, 1)
	if err := n.b.Queue().Publish(ctx, legit...); err != nil {
		t.Fatal(err)
	}
	snd := new(spooltest.Recorder)
	n.b.Queue().SetSender(snd, 2)
	natstest.WaitFor(t, "the readable event delivered and the newer one met", func() bool {
		return len(snd.Events()) == 1 && counter(reg, "caddy_hooks_records_unreadable_total", "store", version.StoreQueue, "version", "9") == 1
	})
	for range 2 { // listed twice, counted once
		dls, err := n.b.Queue().DeadLetters(ctx)
		if err != nil || len(dls) != 0 {
			t.Fatalf("dead letters %v, %v; want the newer one not listed", dls, err)
		}
	}
	if k, err := n.b.Queue().Drop(ctx); k != 0 || err != nil {
		t.Errorf("drop all: %d, %v", k, err)
	}
	st, err := n.b.Queue().Stats(ctx)
	if err != nil || st.Depth != 1 || st.DeadLetters != 1 {
		t.Errorf("stats %+v, %v; want the newer queued event and dead letter kept", st, err)
	}
	if got := counter(reg, "caddy_hooks_records_unreadable_total", "store", version.StoreDeadLetter, "version", "9"); got != 1 {
		t.Errorf("newer dead letters counted %v, want 1", got)
	}
	if got := snd.Events(); len(got) != 1 || got[0].ID != legit[0].ID {
		t.Errorf("delivered %v", got)
	}

	// an idempotency record
	kv, err := js.KeyValue(ctx, s.n.idem)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("ab", 32)
	val := s.seal([]byte(`{"v":9,"n":"later","s":200,"b":"eyJvayI6dHJ1ZX0=","later":"fields"}`), sealIdem, s.n.idem, key)
	if _, err := kv.Create(ctx, key, val); err != nil {
		t.Fatal(err)
	}
	rec, claimed, err := n.b.Claims().Claim(ctx, key, time.Now().Add(time.Minute))
	if err != nil || claimed || !rec.Pending || rec.Node != newerNode {
		t.Errorf("claim of a newer record: %+v, claimed %v, %v; want it held, not taken over or answered from", rec, claimed, err)
	}
	if e, err := kv.Get(ctx, key); err != nil || string(e.Value()) != string(val) {
		t.Errorf("the newer idempotency record after the claim: %v", err)
	}

	// the wake lane's lease
	q := s.queue
	lanes, err := js.KeyValue(ctx, s.n.lanes)
	if err != nil {
		t.Fatal(err)
	}
	lease := append(append([]byte{leaseHeld}, "later-node"...), 0, 9)
	lease = binary.BigEndian.AppendUint64(lease, uint64(time.Now().UnixMilli()))
	if _, err := lanes.Put(ctx, leaseKey, s.seal(lease, sealLease, s.n.lanes, leaseKey)); err != nil {
		t.Fatal(err)
	}
	if l, _, err := q.tryLease(ctx); l != nil || err != nil {
		t.Errorf("took the lease a newer release holds: %v", err)
	}
	for store, want := range map[string]float64{version.StoreIdempotency: 1, version.StoreLease: 1} {
		if got := counter(reg, "caddy_hooks_records_unreadable_total", "store", store, "version", "9"); got != want {
			t.Errorf("unreadable %s counted %v, want %v", store, got, want)
		}
	}
}

// TestMixedVersionCluster (issue 30 item 4): nodes at cluster level 0
// (a release before v0.9.0) and 1 run together: every live node sees
// the lowest level (the gate); until it reaches 1 the new nodes send
// outcomes in version 1, which the old ones read, and read version 1;
// once the old nodes are gone they number their outcomes (version 2) and
// refuse version 1 (a replay); an old node joining again (a rollback)
// lowers the gate at once. Meanwhile events published through edges of
// both levels, each also published twice under its id, are delivered by
// delivery nodes of both levels once per id: nothing lost, nothing
// doubled.
func TestMixedVersionCluster(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, reg := metricsOf(t)
	open := func(level int, metrics *cluster.Metrics) *node {
		p := natstest.NewProxy(t, srv.Addr())
		return openNodeMetrics(t, []string{p.URL()}, "mixed", queueParams(), levelOf(level), metrics)
	}
	edgeOld, delivOld := open(0, nil), open(0, nil)
	edgeNew, delivNew := open(1, m), open(1, nil)
	nodes := []*node{edgeOld, delivOld, edgeNew, delivNew}
	natstest.WaitFor(t, "up", func() bool {
		for _, n := range nodes {
			if !n.b.Up() {
				return false
			}
		}
		return true
	})
	members := make([]*cluster.Members, len(nodes))
	for i, n := range nodes {
		members[i] = membersOf(t, n)
	}
	gateIs := func(want int, ns ...*node) func() bool {
		return func() bool {
			for _, n := range ns {
				if n.b.Gate().Level() != want {
					return false
				}
			}
			return true
		}
	}
	natstest.WaitFor(t, "every node's gate at the old level", gateIs(0, nodes...))

	// outcomes: recorded off the wire
	nc, _ := natstest.PlainClient(t, srv.URL())
	var mu sync.Mutex
	var wire []string
	recordWire(t, nc, "hooks.mixed.outcome", &mu, &wire)
	read := map[*node]*[]string{}
	for _, n := range []*node{edgeOld, edgeNew} {
		got := new([]string)
		read[n] = got
		stop, err := n.b.(cluster.Outcomes).SubscribeOutcomes(func(b cluster.OutcomeBatch) {
			mu.Lock()
			*got = append(*got, b.Items[0].ID)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	publish := func(n *node, id string) string {
		t.Helper()
		return publishOutcome(t, n, id, &mu, &wire)
	}
	readBy := func(n *node, id string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, got := range *read[n] {
			if got == id {
				return true
			}
		}
		return false
	}
	v1 := publish(delivNew, "mixed-1")
	if !strings.Contains(v1, `"v":1`) || strings.Contains(v1, `"from"`) {
		t.Errorf("a new node with an old one in the cluster sent %s; want version 1", v1)
	}
	natstest.WaitFor(t, "version 1 read by both", func() bool { return readBy(edgeOld, "mixed-1") && readBy(edgeNew, "mixed-1") })
	oldMsg := publish(delivOld, "old-1")
	natstest.WaitFor(t, "the old node's outcome read by the new edge", func() bool { return readBy(edgeNew, "old-1") })

	// events through both edges, delivered by both delivery nodes
	gw := &natstest.Gateway{}
	delivOld.b.Queue().SetSender(gw, 4)
	delivNew.b.Queue().SetSender(gw, 4)
	ctx := ctxT(t)
	var evs []*spool.Event
	for i, e := range []*node{edgeOld, edgeNew} {
		batch := natstest.Events(fmt.Sprintf("mixed-e%d", i), spool.KindAgent, 50)
		batch = append(batch, natstest.Events(fmt.Sprintf("mixed-w%d", i), spool.KindWake, 20)...)
		for _, ev := range batch {
			if err := e.b.Queue().Publish(ctx, ev); err != nil {
				t.Fatal(err)
			}
			if err := []*node{edgeNew, edgeOld}[i].b.Queue().Publish(ctx, ev); err != nil { // the same id again, through the other edge
				t.Fatal(err)
			}
		}
		evs = append(evs, batch...)
	}
	natstest.WaitFor(t, "every event delivered", func() bool { return gw.Delivered() == len(evs) })
	if _, doubled := gw.Counts(); doubled != 0 {
		t.Errorf("%d events delivered twice", doubled)
	}

	// the old nodes go: the gate rises, outcomes are numbered, version 1 is refused
	for i, n := range []*node{edgeOld, delivOld} {
		members[i].Close()
		_ = n.eng.Cleanup()
	}
	natstest.WaitFor(t, "the new nodes' gate at level 1", gateIs(1, edgeNew, delivNew))
	v2 := publish(delivNew, "mixed-2")
	if !strings.Contains(v2, `"v":2`) || !strings.Contains(v2, `"from"`) {
		t.Errorf("with only new nodes, sent %s; want version 2", v2)
	}
	natstest.WaitFor(t, "version 2 read", func() bool { return readBy(edgeNew, "mixed-2") })
	// the old node's version 1 message, recorded and sealed as it was
	rejected := counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedOutcome)
	sealed := edgeNew.b.(*handle).seal([]byte(oldMsg), sealOutcome, "hooks.mixed.outcome")
	if err := nc.Publish("hooks.mixed.outcome", sealed); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, "version 1 refused once every node runs level 1", func() bool {
		return counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedOutcome) == rejected+1
	})

	// a rollback: an old node joins again
	back := open(0, nil)
	natstest.WaitFor(t, "up", back.b.Up)
	membersOf(t, back)
	natstest.WaitFor(t, "the gate lowered by the old node", gateIs(0, edgeNew, delivNew, back))
	if v := publish(delivNew, "mixed-3"); !strings.Contains(v, `"v":1`) {
		t.Errorf("after the old node joined again, sent %s; want version 1", v)
	}
}
