package natscluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// within runs fn and reports whether it returned within d (fn keeps
// running otherwise; the test then fails and ends).
func within(d time.Duration, fn func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestCutConnectionAnswersWithinTimeout (issue 21 item 5): the path to the
// server goes silent without a reset (a blackholed proxy: nothing is
// forwarded, nothing is closed) while many large publishes are under way,
// so the connection's buffers fill and its writes block. Every publish
// still returns within the timeout plus a second (ErrUnconfirmed or
// ErrUnavailable, never a 200 that was not acknowledged), and Up, which
// the metrics and every request ask, answers at once and turns false.
// Once the path is back, the node reconnects and publishes again.
func TestCutConnectionAnswersWithinTimeout(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	p := natstest.NewProxy(t, srv.Addr())
	const timeout = 2 * time.Second
	const hangGuard = 5 * timeout // ends a publish that never returns; the bound is below
	n := openNode(t, []string{p.URL()}, "cut", queueParams(), func(c *Config) { c.Timeout = caddy.Duration(timeout) })
	natstest.WaitFor(t, "node up", n.b.Up)
	q := n.b.Queue()
	if err := q.Publish(ctxT(t), natstest.Events("before", spool.KindAgent, 1)...); err != nil {
		t.Fatal(err)
	}

	p.Blackhole(true)
	body := []byte(`{"message":"` + strings.Repeat("x", 256<<10) + `"}`)
	const senders, each = 16, 6 // 24 MiB: far more than the sockets hold
	var mu sync.Mutex
	outcomes := map[string]int{}
	var slowest time.Duration
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for k := range each {
				ev := &spool.Event{ID: fmt.Sprintf("cut-%d-%d", s, k), Kind: spool.KindAgent, Path: "/hooks/agent", Body: body, FirstSeen: time.Now()}
				// the publish's return is stamped by the goroutine that
				// publishes, against its own context's start: a waiter
				// woken late on a busy machine (or picking the timer of
				// a select in which both are ready) measures the CPU,
				// not the publish
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				var err error
				var took time.Duration
				start := time.Now()
				if !within(hangGuard, func() { err = q.Publish(ctx, ev); took = time.Since(start) }) {
					cancel()
					t.Errorf("publish %s: no answer within %s", ev.ID, hangGuard)
					return
				}
				cancel()
				if took > timeout+time.Second {
					t.Errorf("publish %s: returned after %s, want within %s", ev.ID, took.Round(time.Millisecond), timeout+time.Second)
					return
				}
				what := "ok"
				switch {
				case errors.Is(err, cluster.ErrUnconfirmed):
					what = "unconfirmed"
				case errors.Is(err, cluster.ErrUnavailable):
					what = "unavailable"
				case err != nil:
					what = err.Error()
				}
				mu.Lock()
				outcomes[what]++
				slowest = max(slowest, took)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for !t.Failed() {
			up := true
			if !within(time.Second, func() { up = n.b.Up() }) {
				t.Error("Up did not answer within a second while the connection was cut")
				return
			}
			if !up {
				return
			}
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("publishes while cut off: %v; slowest %s", outcomes, slowest.Round(time.Millisecond))
	if outcomes["ok"] != 0 || len(outcomes) == 0 {
		t.Errorf("outcomes while cut off %v: want only unconfirmed or unavailable", outcomes)
	}

	p.Blackhole(false)
	natstest.WaitFor(t, "node up after the cut", n.b.Up)
	natstest.WaitFor(t, "publish after the cut", func() bool {
		return q.Publish(ctxT(t), natstest.Events("after", spool.KindAgent, 1)...) == nil
	})
}

// TestPublishErrorsTellStoredFromNotStored (issue 21 item 7): a publish
// failure is "not stored" (ErrUnavailable, ErrFull: the caller may answer
// 503) only when the servers refused the event or it was never sent; a
// publish that was sent and not acknowledged in time is ErrUnconfirmed,
// and so is a batch of which some events were stored.
func TestPublishErrorsTellStoredFromNotStored(t *testing.T) {
	apiErr := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	full := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"refused by the servers", apiErr, cluster.ErrUnavailable},
		{"full", full, cluster.ErrFull},
		{"no stream serves the subject", jetstream.ErrNoStreamResponse, cluster.ErrUnavailable},
		{"no responders", nats.ErrNoResponders, cluster.ErrUnavailable},
		{"never sent: reconnecting", nats.ErrReconnectBufExceeded, cluster.ErrUnavailable},
		{"never sent: draining", nats.ErrConnectionDraining, cluster.ErrUnavailable},
		{"closed, maybe while waiting", nats.ErrConnectionClosed, cluster.ErrUnconfirmed},
		{"sent, no ack in time", context.DeadlineExceeded, cluster.ErrUnconfirmed},
		{"sent, request cancelled", context.Canceled, cluster.ErrUnconfirmed},
		{"sent, nats timeout", nats.ErrTimeout, cluster.ErrUnconfirmed},
		{"async ack timeout", jetstream.ErrAsyncPublishTimeout, cluster.ErrUnconfirmed},
		{"write failed part way", errors.New("write tcp: i/o timeout"), cluster.ErrUnconfirmed},
	} {
		if got := publishErr(c.err); !errors.Is(got, c.want) {
			t.Errorf("%s: publishErr(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		name            string
		n, sent, stored int
		errs            []error
		want            error
	}{
		{"all stored", 3, 3, 3, nil, nil},
		{"none sent", 3, 0, 0, []error{nats.ErrReconnectBufExceeded}, cluster.ErrUnavailable},
		{"all refused", 2, 2, 0, []error{apiErr, apiErr}, cluster.ErrUnavailable},
		{"one stored, one refused", 2, 2, 1, []error{apiErr}, cluster.ErrUnconfirmed},
		{"one stored, rest never sent", 3, 1, 1, []error{nats.ErrReconnectBufExceeded}, cluster.ErrUnconfirmed},
		{"none stored, one unanswered", 2, 2, 0, []error{apiErr, context.DeadlineExceeded}, cluster.ErrUnconfirmed},
	} {
		got := batchErr(c.n, c.sent, c.stored, c.errs)
		if (c.want == nil) != (got == nil) || (c.want != nil && !errors.Is(got, c.want)) {
			t.Errorf("%s: batchErr = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSameEventFromTwoNodesAtOnce (issue 21 item 8): two nodes publish the
// same event ids at the same moment to a replicated queue. The servers
// answer one of each pair "duplicate message id is in process" (10158)
// while the other is being stored; that is not a failure: the publish is
// repeated, deduplicated, and both nodes succeed, one message per id.
func TestSameEventFromTwoNodesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster; run without -short")
	}
	c := natstest.RunCluster(t, 3)
	urls := c.URLs()
	r3 := func(c *Config) { c.Replicas = 3 }
	a := openNode(t, natstest.Rotate(urls, 0), "same", queueParams(), r3)
	b := openNode(t, natstest.Rotate(urls, 1), "same", queueParams(), r3)
	natstest.WaitFor(t, "nodes up", func() bool { return a.b.Up() && b.b.Up() })
	ctx := ctxT(t)
	// every third request is one event (a publish and its ack), the
	// others a fan-out of four (published together)
	const ids = 400
	events := func(i int) []*spool.Event {
		evs := natstest.Events(fmt.Sprintf("same%03d", i), spool.KindAgent, 4)
		if i%3 == 0 {
			return evs[:1]
		}
		return evs
	}
	want := 0
	for i := range ids {
		want += len(events(i))
	}
	var mu sync.Mutex
	failed := map[string]int{}
	var wg sync.WaitGroup
	for _, nd := range []*node{a, b} {
		for g := range 8 {
			wg.Go(func() {
				for i := g; i < ids; i += 8 {
					if err := nd.b.Queue().Publish(ctx, events(i)...); err != nil {
						mu.Lock()
						failed[err.Error()]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for msg, n := range failed {
		t.Errorf("%d publishes failed: %s", n, msg)
	}
	st, err := a.b.Queue().Stats(ctx)
	if err != nil || st.Depth != uint64(want) {
		t.Errorf("queue holds %d messages (%v), want %d: one per id", st.Depth, err, want)
	}
}

// TestUpFollowsTheStreamQuorum (issue 21 item 8): with two servers of a
// three-server cluster gone, the node's own server still accepts its
// connection, but the replicated streams have no quorum: the node says it
// is not up (caddy_hooks_cluster_up 0, watchers told, requests fall back
// at once) until the servers are back.
func TestUpFollowsTheStreamQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster; run without -short")
	}
	c := natstest.RunCluster(t, 3)
	n := openNode(t, []string{c.Servers[0].URL()}, "quorum", queueParams(), func(c *Config) { c.Replicas = 3 })
	natstest.WaitFor(t, "node up", n.b.Up)
	var mu sync.Mutex
	told := true // what the watchers were told last
	stop := n.b.Watch(func(up bool) { mu.Lock(); told = up; mu.Unlock() })
	defer stop()
	last := func() bool { mu.Lock(); defer mu.Unlock(); return told }

	c.Servers[1].Stop()
	c.Servers[2].Stop()
	natstest.WaitFor(t, "node down without quorum", func() bool { return !n.b.Up() })
	natstest.WaitFor(t, "watchers told down", func() bool { return !last() })
	if err := n.b.Queue().Publish(ctxT(t), natstest.Events("noquorum", spool.KindAgent, 1)...); !errors.Is(err, cluster.ErrUnavailable) {
		t.Errorf("publish without quorum: %v, want ErrUnavailable at once", err)
	}

	c.Servers[1].Restart(t)
	c.Servers[2].Restart(t)
	natstest.WaitFor(t, "node up with quorum again", n.b.Up)
	natstest.WaitFor(t, "watchers told up", last)
}

// TestWaitWithoutMetaLeader (issue 21 item 6): a copy of an idempotency
// key waits for the first request's reply while the cluster has no
// metadata leader (two of three servers gone; the bucket, one replica,
// lives on the third). Waiting must not need the metadata leader: the
// copy gets the reply once the first request settles, instead of waiting
// out its whole deadline (a KV watch's consumer could not be created).
func TestWaitWithoutMetaLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster; run without -short")
	}
	c := natstest.RunCluster(t, 3)
	a := openNode(t, c.URLs(), "meta", nil, nil)
	natstest.WaitFor(t, "node up", a.b.Up)
	stream := "KV_hooks_meta_idem"
	var keep *natstest.Server
	natstest.WaitFor(t, "bucket leader known", func() bool {
		for _, s := range c.Servers {
			if s.JetStreamIsStreamLeader("$G", stream) {
				keep = s
				return true
			}
		}
		return false
	})
	// both nodes reach only the server that holds the bucket
	pa := natstest.NewProxy(t, keep.Addr())
	pb := natstest.NewProxy(t, keep.Addr())
	a = openNode(t, []string{pa.URL()}, "meta", nil, nil)
	b := openNode(t, []string{pb.URL()}, "meta", nil, nil)
	natstest.WaitFor(t, "nodes up", func() bool { return a.b.Up() && b.b.Up() })
	ctx := ctxT(t)
	if _, claimed, err := a.b.Claims().Claim(ctx, "k", time.Now().Add(time.Minute)); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	for _, s := range c.Servers {
		if s != keep {
			s.Stop()
		}
	}
	natstest.WaitFor(t, "metadata leader gone", func() bool { return !keep.JetStreamIsLeader() })

	type waited struct {
		rec cluster.Record
		ok  bool
		err error
	}
	got := make(chan waited, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		rec, ok, err := b.b.Claims().Wait(wctx, "k")
		got <- waited{rec, ok, err}
	}()
	if err := a.b.Claims().Settle(ctx, "k", 200, []byte(`{"ok":true}`)); err != nil {
		t.Fatalf("settle without a metadata leader: %v", err)
	}
	w := <-got
	if w.err != nil || !w.ok || w.rec.Status != 200 || string(w.rec.Body) != `{"ok":true}` {
		t.Fatalf("wait without a metadata leader: %+v, want the settled reply", w)
	}
}
