package natscluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/promtest"
)

// TestGrayServerIsLeft (issue 34 item 1): the server a node is connected
// to keeps its connection up (PINGs answered) while no JetStream reply
// comes back through it. The node compares with another server, which
// answers, leaves the silent one for it, says so (log, and
// caddy_hooks_cluster_reconnects_total{reason="stalled"}) and is up
// again; every publish meanwhile answers within timeout + 1 s. When every
// server is silent (a stream or the cluster stalled, not a server), the
// node stays where it is: moving would gain nothing.
func TestGrayServerIsLeft(t *testing.T) {
	const timeout = time.Second
	for _, c := range []struct {
		name      string
		grayBoth  bool
		wantMoved bool
	}{
		{"one server silent: the node moves", false, true},
		{"every server silent: the node stays", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := natstest.Run(t, natstest.Options{})
			p1, p2 := natstest.NewGrayProxy(t, srv.Addr()), natstest.NewGrayProxy(t, srv.Addr())
			reg := prometheus.NewRegistry()
			m, err := cluster.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			n := openNodeMetrics(t, []string{p1.URL(), p2.URL()}, "gray", queueParams(), func(cfg *Config) {
				cfg.Timeout = caddy.Duration(timeout)
			}, m)
			natstest.WaitFor(t, "node up", func() bool { return n.b.Up() && p1.Conns()+p2.Conns() == 1 })
			m.Bind(n.b)
			gray, other := p1, p2 // the one the node uses goes gray
			if p2.Conns() == 1 {
				gray, other = p2, p1
			}

			gray.Gray(true)
			if c.grayBoth {
				other.Gray(true)
			}
			start := time.Now()
			deadline := start.Add(30 * time.Second)
			for k := 0; ; k++ {
				var err error
				if !within(timeout+time.Second, func() {
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					err = n.b.Queue().Publish(ctx, natstest.Events(fmt.Sprintf("gray%d", k), spool.KindAgent, 1)...)
					cancel()
				}) {
					t.Fatalf("publish %d: no answer within %s", k, timeout+time.Second)
				}
				moved := other.Conns() >= 1 && gray.Conns() == 0 // (the side connection is on the other one too)
				if c.wantMoved && err == nil && moved {
					t.Logf("publishing again %s after the server went gray", time.Since(start).Round(10*time.Millisecond))
					break
				}
				if !c.wantMoved && time.Since(start) > 6*timeout {
					if moved {
						t.Fatal("the node left its server although no server answered")
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still failing 30s after the server went gray (last: %v; connections: gray %d, other %d)", err, gray.Conns(), other.Conns())
				}
				time.Sleep(50 * time.Millisecond) // the load's pace
			}
			want := 0.0
			if c.wantMoved {
				want = 1
			}
			if got, _ := promtest.Value(reg, "caddy_hooks_cluster_reconnects_total", "reason", reasonStalled); got != want {
				t.Errorf("reconnects_total{reason=stalled} = %v, want %v", got, want)
			}
		})
	}
}

// TestReconnectAvoidsTheStalledServer: the reconnection choice skips a
// server left as stalled while another is there, tries them all when
// every one is avoided, and pauses after each whole round.
func TestReconnectAvoidsTheStalledServer(t *testing.T) {
	u := func(s string) *url.URL { p, _ := url.Parse(s); return p }
	pool := []nats.Server{{URL: u("nats://a:4222")}, {URL: u("nats://b:4222")}, {URL: u("nats://c:4222")}}
	for _, c := range []struct {
		name   string
		avoid  []string
		picks  []string // the servers of successive attempts
		paused []bool   // whether each attempt waits first
	}{
		{"none avoided: in turn", nil, []string{"a", "b", "c", "a"}, []bool{false, false, false, true}},
		{"one avoided: skipped", []string{"nats://a:4222"}, []string{"b", "c", "b", "c"}, []bool{false, false, true, false}},
		{"all avoided: all tried", []string{"nats://a:4222", "nats://b:4222", "nats://c:4222"}, []string{"a", "b", "c"}, []bool{false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v servers
			v.avoid = map[string]time.Time{}
			for _, a := range c.avoid {
				v.avoid[a] = time.Now().Add(time.Hour)
			}
			pick := v.pick(time.Second, 0)
			for i, want := range c.picks {
				sv, delay := pick(pool, nats.ServerInfo{})
				if sv == nil || sv.URL.Hostname() != want {
					t.Fatalf("attempt %d: %v, want %s", i, sv, want)
				}
				if (delay > 0) != c.paused[i] {
					t.Errorf("attempt %d: delay %s, want a pause %v", i, delay, c.paused[i])
				}
			}
		})
	}
}

// TestCopyReadsThroughAnotherServer (issue 34 item 3): a copy waits for
// the first request's reply while the server it reads through stops
// answering (as a SIGSTOPped server does: no reply, no reset). Its reads
// go through another server, so it gets the reply the first request
// stored, not ErrBusy after its per-read timeout.
func TestCopyReadsThroughAnotherServer(t *testing.T) {
	const timeout = time.Second
	srv := natstest.Run(t, natstest.Options{})
	p1, p2 := natstest.NewProxy(t, srv.Addr()), natstest.NewProxy(t, srv.Addr())
	short := func(cfg *Config) { cfg.Timeout = caddy.Duration(timeout) }
	a := openNode(t, []string{srv.URL()}, "copy", nil, short)
	b := openNode(t, []string{p1.URL(), p2.URL()}, "copy", nil, short)
	natstest.WaitFor(t, "nodes up", func() bool { return a.b.Up() && b.b.Up() && p1.Conns()+p2.Conns() == 1 })
	stopped := p1 // the server the copy reads through stops
	if p2.Conns() == 1 {
		stopped = p2
	}
	opt := cluster.IdempotencyOptions{Lease: time.Minute, Wait: 4 * timeout, Timeout: timeout}
	waiting := newWaitSeen(b.b.Claims())
	first, copy := cluster.NewIdempotency(a.b.Claims(), opt), cluster.NewIdempotency(waiting, opt)
	_, claim, err := first.Acquire(ctxT(t), "k")
	if err != nil || claim == nil {
		t.Fatalf("first: %v %v", claim, err)
	}
	type result struct {
		rep *cluster.Reply
		err error
	}
	got := make(chan result, 1)
	go func() {
		rep, _, err := copy.Acquire(ctxT(t), "k")
		got <- result{rep, err}
	}()
	select { // the copy found the key claimed and waits
	case <-waiting.seen:
	case r := <-got:
		t.Fatalf("copy answered before it waited: %+v %v", r.rep, r.err)
	}
	stopped.Blackhole(true)
	if err := claim.Settle(200, []byte(`{"ok":true,"runId":"r"}`)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.rep == nil || string(r.rep.Body) != `{"ok":true,"runId":"r"}` {
		t.Fatalf("copy: %+v %v, want the first request's reply", r.rep, r.err)
	}
}

// TestUnreadableKeyIsNotBusy: a copy whose reads fail (here: no server
// answers them at all) gets ErrUnavailable, on which the handler answers
// from its own cache, never ErrBusy (409 "still being processed").
func TestUnreadableKeyIsNotBusy(t *testing.T) {
	const timeout = 500 * time.Millisecond
	srv := natstest.Run(t, natstest.Options{})
	p := natstest.NewProxy(t, srv.Addr())
	short := func(cfg *Config) { cfg.Timeout = caddy.Duration(timeout) }
	a := openNode(t, []string{srv.URL()}, "unread", nil, short)
	b := openNode(t, []string{p.URL()}, "unread", nil, short)
	natstest.WaitFor(t, "nodes up", func() bool { return a.b.Up() && b.b.Up() })
	opt := cluster.IdempotencyOptions{Lease: time.Minute, Wait: 10 * timeout, Timeout: timeout}
	_, claim, err := cluster.NewIdempotency(a.b.Claims(), opt).Acquire(ctxT(t), "k")
	if err != nil || claim == nil {
		t.Fatalf("first: %v %v", claim, err)
	}
	defer claim.Release()
	waiting := newWaitSeen(b.b.Claims())
	got := make(chan error, 1)
	go func() {
		_, _, err := cluster.NewIdempotency(waiting, opt).Acquire(ctxT(t), "k")
		got <- err
	}()
	select { // the copy found the key claimed and waits
	case <-waiting.seen:
	case err := <-got:
		t.Fatalf("copy answered before it waited: %v", err)
	}
	p.Blackhole(true)
	if err := <-got; !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("copy that cannot read: %v, want ErrUnavailable", err)
	}
}

// waitSeen is a ClaimStore whose seen closes when a Wait begins: the
// copy read the key's claim through its connection and waits for the
// reply. (A fixed pause for it lost the race on a busy machine: the copy's
// claim then went to the silent server and timed out, ErrUnavailable.)
type waitSeen struct {
	cluster.ClaimStore
	once sync.Once
	seen chan struct{}
}

func newWaitSeen(s cluster.ClaimStore) *waitSeen {
	return &waitSeen{ClaimStore: s, seen: make(chan struct{})}
}

// Wait implements cluster.ClaimStore.
func (w *waitSeen) Wait(ctx context.Context, key string) (cluster.Record, bool, error) {
	w.once.Do(func() { close(w.seen) })
	return w.ClaimStore.Wait(ctx, key)
}
