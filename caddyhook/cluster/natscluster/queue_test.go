package natscluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

func TestQueueDeliversOnceInWakeOrderWithRetries(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	p := natstest.NewProxy(t, srv.Addr())
	edge := openNode(t, []string{srv.URL()}, "order", queueParams(), nil)
	deliv := openNode(t, []string{p.URL()}, "order", queueParams(), nil)
	natstest.WaitFor(t, "up", func() bool { return edge.b.Up() && deliv.b.Up() })
	ctx := ctxT(t)

	wakes := natstest.Events("wake", spool.KindWake, 12)
	agents := natstest.Events("agent", spool.KindAgent, 30)
	// publish before any delivery node runs, one by one, then once more
	// (a sender's retry after a lost acknowledgement): the ids dedupe
	for _, ev := range append(slices.Clone(wakes), agents...) {
		if err := edge.b.Queue().Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := edge.b.Queue().Publish(ctx, wakes[3], agents[5]); err != nil {
		t.Fatal(err)
	}
	gw := new(natstest.Gateway)
	// every fourth event fails twice (503, then a network error) first
	gw.Respond = func(ev *spool.Event, attempt int) (int, string, error) {
		var n int
		fmt.Sscanf(ev.ID[strings.LastIndex(ev.ID, "-")+1:], "%d", &n)
		if n%4 == 0 {
			switch attempt {
			case 0:
				return http.StatusServiceUnavailable, "busy", nil
			case 1:
				return 0, "", errors.New("connection refused")
			}
		}
		return http.StatusOK, "", nil
	}
	deliv.b.Queue().SetSender(gw, 4)
	total := len(wakes) + len(agents)
	natstest.WaitFor(t, "all delivered", func() bool { return gw.Delivered() == total })
	if _, d := gw.Counts(); d != 0 {
		t.Errorf("%d events delivered twice", d)
	}
	var wakeOrder []string
	for _, id := range gw.Order() {
		if strings.HasPrefix(id, "wake-") {
			wakeOrder = append(wakeOrder, id)
		}
	}
	var want []string
	for _, ev := range wakes {
		want = append(want, ev.ID)
	}
	if !slices.Equal(wakeOrder, want) {
		t.Errorf("wake order\n got %v\nwant %v", wakeOrder, want)
	}
	// every fourth event of each kind failed twice before its 2xx
	// (and its lanes wait for more: ready)
	wantC := cluster.DeliveryCounters{Delivered: uint64(total), Redeliveries: 2 * uint64((len(wakes)+3)/4+(len(agents)+3)/4), Ready: true}
	natstest.WaitFor(t, "counters settled", func() bool { return deliv.b.Queue().Counters() == wantC })
	natstest.WaitFor(t, "queue empty", func() bool {
		st, err := edge.b.Queue().Stats(ctx)
		return err == nil && st.Depth == 0
	})
}

func TestQueueDeadLettersListRetryDrop(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	qp := queueParams()
	qp.MaxAge = time.Hour
	n := openNode(t, []string{srv.URL()}, "dead", qp, nil)
	natstest.WaitFor(t, "up", n.b.Up)
	ctx := ctxT(t)
	q := n.b.Queue()

	refuse := atomic.Bool{}
	refuse.Store(true)
	gw := new(natstest.Gateway)
	gw.Respond = func(ev *spool.Event, _ int) (int, string, error) {
		if refuse.Load() && strings.HasPrefix(ev.ID, "bad") {
			return http.StatusBadRequest, `{"ok":false,"error":"agentId not allowed"}`, nil
		}
		return http.StatusOK, "", nil
	}
	q.SetSender(gw, 2)
	old := natstest.Events("old", spool.KindAgent, 1)[0]
	old.FirstSeen = time.Now().Add(-2 * time.Hour) // past max_age
	evs := append(natstest.Events("bad", spool.KindAgent, 3), natstest.Events("good", spool.KindAgent, 2)...)
	if err := q.Publish(ctx, append(evs, old)...); err != nil {
		t.Fatal(err)
	}
	var dead []*spool.Event
	natstest.WaitFor(t, "four dead letters", func() bool {
		var err error
		dead, err = q.DeadLetters(ctx)
		return err == nil && len(dead) == 4
	})
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[d.ID] = d.LastError
	}
	if !strings.Contains(reasons["bad-000"], "gateway status 400") || !strings.Contains(reasons["bad-000"], "agentId not allowed") {
		t.Errorf("reason of a refused event: %q", reasons["bad-000"])
	}
	if reasons["old-000"] != spool.ReasonExpired {
		t.Errorf("reason of an expired event: %q", reasons["old-000"])
	}
	if gw.Attempts("old-000") != 0 {
		t.Error("an expired event was sent to the gateway")
	}
	natstest.WaitFor(t, "dead-lettered counter at 4", func() bool { return q.Counters().DeadLettered == 4 })

	if k, err := q.Drop(ctx, "old-000"); err != nil || k != 1 {
		t.Fatalf("drop: %d %v", k, err)
	}
	refuse.Store(false)
	if k, err := q.Retry(ctx, "bad-000", "bad-001", "unknown"); err != nil || k != 2 {
		t.Fatalf("retry: %d %v", k, err)
	}
	natstest.WaitFor(t, "retried events delivered", func() bool { return gw.Delivered() == 4 })
	dead, err := q.DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].ID != "bad-002" {
		t.Fatalf("dead letters after retry and drop: %v %v", dead, err)
	}
	if k, err := q.Drop(ctx); err != nil || k != 1 {
		t.Fatalf("drop all: %d %v", k, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.DeadLetters != 0 {
		t.Fatalf("stats after drop: %+v %v", st, err)
	}
}

func TestQueueFullIsRefused(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	qp := queueParams()
	qp.MaxBytes = 4 << 10
	n := openNode(t, []string{srv.URL()}, "full", qp, nil)
	natstest.WaitFor(t, "up", n.b.Up)
	ctx := ctxT(t)
	ev := natstest.Events("big", spool.KindAgent, 10)
	for _, e := range ev {
		e.Body = []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	}
	var err error
	stored := 0
	for _, e := range ev {
		if err = n.b.Queue().Publish(ctx, e); err != nil {
			break
		}
		stored++
	}
	if !errors.Is(err, cluster.ErrFull) {
		t.Fatalf("publish past max_bytes: %v, want ErrFull", err)
	}
	if stored == 0 || stored == len(ev) {
		t.Fatalf("stored %d of %d before full", stored, len(ev))
	}
}

// TestDeliveryNodeLostMidDelivery: a delivery node stops answering the
// server in the middle of a delivery (as after kill -9); another delivery
// node gets the event after the ack wait, with the same id.
func TestDeliveryNodeLostMidDelivery(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	pa := natstest.NewProxy(t, srv.Addr())
	qp := queueParams()
	a := openNode(t, []string{pa.URL()}, "lost", qp, func(c *Config) { c.AckWait = caddy.Duration(500 * time.Millisecond) })
	b := openNode(t, []string{srv.URL()}, "lost", qp, func(c *Config) { c.AckWait = caddy.Duration(500 * time.Millisecond) })
	natstest.WaitFor(t, "up", func() bool { return a.b.Up() && b.b.Up() })
	ctx := ctxT(t)

	inA := make(chan string, 1)
	release := make(chan struct{})
	gwA := new(natstest.Gateway)
	gwA.Respond = func(ev *spool.Event, _ int) (int, string, error) {
		inA <- ev.ID
		<-release // the node hangs mid-delivery
		return http.StatusOK, "", nil
	}
	a.b.Queue().SetSender(gwA, 2)
	if err := a.b.Queue().Publish(ctx, natstest.Events("mid", spool.KindAgent, 1)...); err != nil {
		t.Fatal(err)
	}
	id := <-inA
	pa.SetTarget("") // node A is cut off: no ack, no progress, no nak
	gwB := new(natstest.Gateway)
	b.b.Queue().SetSender(gwB, 2)
	natstest.WaitFor(t, "node B delivered the event", func() bool { return gwB.Delivered() == 1 })
	if got := gwB.Order()[0]; got != id {
		t.Errorf("node B delivered %s, want %s (the same id, hence the same Idempotency-Key)", got, id)
	}
	close(release)
	// node B's acknowledgement follows its gateway's answer: the queue
	// empties once the server has it
	natstest.WaitFor(t, "the queue empty after the redelivery", func() bool {
		st, err := b.b.Queue().Stats(ctx)
		return err == nil && st.Depth == 0
	})
}

// TestClusterLosesOneServer runs the queue, the idempotency claims and
// the lockout broadcast on a 3-node JetStream cluster with 3 replicas and
// stops one server in the middle of a stream of events.
func TestClusterLosesOneServer(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster; run without -short")
	}
	c := natstest.RunCluster(t, 3)
	urls := c.URLs()
	qp := queueParams()
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, openNode(t, natstest.Rotate(urls, i), "r3", qp, func(c *Config) { c.Replicas = 3 }))
	}
	natstest.WaitFor(t, "nodes up", func() bool { return nodes[0].b.Up() && nodes[1].b.Up() && nodes[2].b.Up() })
	gw := new(natstest.Gateway)
	nodes[2].b.Queue().SetSender(gw, 4)
	ctx := ctxT(t)

	const total = 200
	accepted, retries := 0, 0
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			ev := natstest.Events(fmt.Sprintf("ev%03d", i), []string{spool.KindWake, spool.KindAgent}[i%2], 1)[0]
			// an edge retries a publish that got no acknowledgement, as the
			// handler's fallback drain does; the id dedupes
			deadline := time.Now().Add(testTimeout)
			for {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := nodes[i%2].b.Queue().Publish(pctx, ev)
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("publish %s: %v", ev.ID, err)
				}
				retries++
				time.Sleep(100 * time.Millisecond) // the retry backoff of an edge
			}
			accepted++
		}
	}
	publish(0, total/2)
	c.Servers[0].Stop() // one server of three lost
	publish(total/2, total)
	natstest.WaitFor(t, "every accepted event delivered", func() bool { return gw.Delivered() == accepted })
	t.Logf("%d events accepted, %d delivered; %d publishes retried during the leader election", accepted, gw.Delivered(), retries)
	if _, d := gw.Counts(); d != 0 {
		t.Logf("%d events delivered twice (same id) after the server loss", d)
	}

	// idempotency and locks still work with two servers
	idem := []*cluster.Idempotency{
		cluster.NewIdempotency(nodes[0].b.Claims(), cluster.IdempotencyOptions{}),
		cluster.NewIdempotency(nodes[1].b.Claims(), cluster.IdempotencyOptions{}),
	}
	_, claim, err := idem[0].Acquire(ctx, "after-loss")
	if err != nil || claim == nil {
		t.Fatal(claim, err)
	}
	_ = claim.Settle(200, []byte(`{"ok":true}`))
	if rep, cl, err := idem[1].Acquire(ctx, "after-loss"); err != nil || cl != nil || rep == nil {
		t.Fatalf("replay after the loss: %v %v %v", rep, cl, err)
	}
}
