package natscluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// TestViewAskServeFollow: a request reaches every other node serving the
// view (not the asker itself), each answer comes back to the asker
// alone, and a tail batch reaches the inbox it is sent to; a node at a
// cluster level below the view's serves nothing (it is never waited
// for: the asker names it).
func TestViewAskServeFollow(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	older := cluster.LevelClusterView - 1
	a := openNode(t, []string{srv.URL()}, "view", nil, nil)
	b := openNode(t, []string{srv.URL() + "?b"}, "view", nil, nil)
	c := openNode(t, []string{srv.URL() + "?c"}, "view", nil, func(c *Config) { c.level = &older })
	for _, n := range []*node{a, b, c} {
		natstest.WaitFor(t, "up", n.b.Up)
	}
	served := map[string]int{}
	var mu sync.Mutex
	for _, n := range []*node{a, b, c} {
		name := n.b.Node()
		stop, err := n.b.(cluster.Views).ServeView(func(q cluster.ViewRequest) cluster.ViewAnswer {
			mu.Lock()
			served[name]++
			mu.Unlock()
			r := eventlog.NoRates(time.Now())
			return cluster.ViewAnswer{Path: "/hooks", Rates: &r}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var answers []cluster.ViewAnswer
	q := cluster.ViewRequest{ID: cluster.NewViewID(), From: a.b.Node(), Time: time.Now(), Op: cluster.ViewRates}
	if err := a.b.(cluster.Views).AskView(ctx, q, func(ans cluster.ViewAnswer) bool {
		answers = append(answers, ans)
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 1 || answers[0].Node != b.b.Node() || answers[0].ID != q.ID || answers[0].Rates == nil {
		t.Fatalf("answers %+v, want node b's alone", answers)
	}
	mu.Lock()
	if served[a.b.Node()] != 0 || served[c.b.Node()] != 0 || served[b.b.Node()] != 1 {
		t.Errorf("served %v: the asker answers itself, the older node nothing", served)
	}
	mu.Unlock()

	// a tail batch to an inbox
	got := make(chan cluster.TailBatch, 4)
	inbox, stop, err := a.b.(cluster.Views).FollowView(func(tb cluster.TailBatch) { got <- tb })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ev := eventlog.EventJSON{Type: "event", ID: "0c4841af-0000-4000-8000-000000000001", Time: time.Now().UTC(), Path: "/hooks",
		Hook: "wake", Status: 200, State: eventlog.StateQueued, Dispatch: []eventlog.Dispatch{}}
	if err := b.b.(cluster.Views).SendTail(cluster.TailBatch{Inbox: inbox, Node: b.b.Node(), N: 1, Time: time.Now(),
		Entries: []cluster.ViewEntry{{Event: &ev}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case tb := <-got:
		if tb.Node != b.b.Node() || len(tb.Entries) != 1 || tb.Entries[0].Event.ID != ev.ID {
			t.Errorf("batch %+v", tb)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no tail batch")
	}
}

// TestViewRefusesForgedAndReplayed: a request that is not sealed with the
// cluster's keys is dropped and counted; one sealed but sent again (the
// same id) is answered once; one moved to another reply subject is not
// answered.
func TestViewRefusesForgedAndReplayed(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, err := cluster.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	a := openNodeMetrics(t, []string{srv.URL()}, "forge", nil, nil, m)
	natstest.WaitFor(t, "up", a.b.Up)
	var mu sync.Mutex
	n := 0
	stop, err := a.b.(cluster.Views).ServeView(func(cluster.ViewRequest) cluster.ViewAnswer {
		mu.Lock()
		n++
		mu.Unlock()
		return cluster.ViewAnswer{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	h := a.b.(*handle)
	q := cluster.ViewRequest{ID: cluster.NewViewID(), From: "intruder", Time: time.Now(), Op: cluster.ViewRates, Reply: nats.NewInbox()}
	msg, err := cluster.EncodeView(cluster.ViewMessage{Request: &q})
	if err != nil {
		t.Fatal(err)
	}
	answered := 0
	sub, _ := nc.Subscribe(q.Reply, func(*nats.Msg) { mu.Lock(); answered++; mu.Unlock() })
	defer sub.Unsubscribe()
	other, _ := nc.SubscribeSync("_INBOX.elsewhere0")
	defer other.Unsubscribe()
	before := counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedView)
	// unsealed
	_ = nc.PublishMsg(&nats.Msg{Subject: h.viewSubject(), Reply: q.Reply, Data: msg})
	natstest.WaitFor(t, "the unsealed request counted", func() bool {
		return counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedView) == before+1
	})
	// sealed, twice, and once moved to another reply subject
	sealed := h.seal(msg, sealView, h.viewSubject())
	for range 2 {
		_ = nc.PublishMsg(&nats.Msg{Subject: h.viewSubject(), Reply: q.Reply, Data: sealed})
	}
	_ = nc.PublishMsg(&nats.Msg{Subject: h.viewSubject(), Reply: "_INBOX.elsewhere0", Data: sealed})
	natstest.WaitFor(t, "the sealed request answered", func() bool { mu.Lock(); defer mu.Unlock(); return answered == 1 })
	time.Sleep(200 * time.Millisecond) // a second answer would have come by now
	mu.Lock()
	if answered != 1 || n != 1 {
		t.Errorf("answered %d times, served %d times; want once", answered, n)
	}
	mu.Unlock()
	if _, err := other.NextMsg(100 * time.Millisecond); err == nil {
		t.Error("a request moved to another reply subject was answered")
	}
}
