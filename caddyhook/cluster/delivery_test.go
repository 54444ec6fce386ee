package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// TestJudgeDelivery: a node's state from what it told (or last told) and
// the queue: stalled only when events are queued and it made no progress
// for ack_wait (waiting for work counts as progress); a node that does
// not answer is judged from when it was last heard of.
func TestJudgeDelivery(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	queued := QueueHealth{Known: true, Depth: 5, AckWait: 30 * time.Second}
	empty := QueueHealth{Known: true, AckWait: 30 * time.Second}
	for _, tc := range []struct {
		name string
		n    NodeDelivery
		q    QueueHealth
		want string
	}{
		{"delivering", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, InFlight: 2, Progress: ago(time.Second)}}, queued, DeliveryDelivering},
		{"idle", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, Ready: true}}, empty, DeliveryIdle},
		{"waiting for events due later", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, Ready: true, Progress: ago(time.Hour)}}, queued, DeliveryDelivering},
		{"wedged: in flight, no progress", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, InFlight: 1, Progress: ago(time.Minute)}}, queued, DeliveryStalled},
		{"lanes down, events queued", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, Progress: ago(time.Minute)}}, queued, DeliveryStalled},
		{"paused", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{Connected: true, Paused: true}}, queued, DeliveryPaused},
		{"disconnected", NodeDelivery{Answered: true, Heard: now, DeliveryFacts: DeliveryFacts{}}, queued, DeliveryDisconnected},
		{"frozen for longer than ack_wait", NodeDelivery{Heard: ago(40 * time.Second), DeliveryFacts: DeliveryFacts{Progress: ago(45 * time.Second)}}, queued, DeliveryStalled},
		{"frozen for less than ack_wait", NodeDelivery{Heard: ago(10 * time.Second), DeliveryFacts: DeliveryFacts{Progress: ago(time.Hour)}}, queued, DeliverySilent},
		{"frozen, nothing queued", NodeDelivery{Heard: ago(time.Hour)}, empty, DeliverySilent},
		{"frozen, the queue unreadable", NodeDelivery{Heard: ago(time.Hour)}, QueueHealth{AckWait: time.Second}, DeliverySilent},
	} {
		n := tc.n
		JudgeDelivery(&n, tc.q, now)
		if n.State != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, n.State, n.Note, tc.want)
		}
		if !deliveryStates[n.State] {
			t.Errorf("%s: state %q is not one of the states", tc.name, n.State)
		}
	}
}

// TestSummarizeDelivery: "running" only while some node delivers.
func TestSummarizeDelivery(t *testing.T) {
	q := QueueHealth{Known: true, Depth: 3, Oldest: 90 * time.Second}
	node := func(state string) NodeDelivery { return NodeDelivery{State: state} }
	for _, tc := range []struct {
		name  string
		nodes []NodeDelivery
		q     QueueHealth
		want  string
		says  string
	}{
		{"one delivering", []NodeDelivery{node(DeliveryStalled), node(DeliveryDelivering)}, q, DeliveryRunning, "running on 1 of 2"},
		{"the only one stalled", []NodeDelivery{node(DeliveryStalled)}, q, DeliveryStalled, "3 queued, oldest 1m30s"},
		{"the only one frozen", []NodeDelivery{node(DeliverySilent)}, q, DeliveryStalled, "none of 1"},
		{"all paused", []NodeDelivery{node(DeliveryPaused), node(DeliveryPaused)}, q, DeliveryPaused, "paused"},
		{"no delivery node, events queued", nil, q, DeliveryStalled, "no delivery node"},
		{"no delivery node, nothing queued", nil, QueueHealth{Known: true}, DeliveryNone, "no delivery node"},
	} {
		s := SummarizeDelivery(tc.nodes, tc.q)
		if s.State != tc.want || !strings.Contains(s.Text, tc.says) {
			t.Errorf("%s: %+v, want %s saying %q", tc.name, s, tc.want, tc.says)
		}
		if s.State != DeliveryRunning && strings.Contains(s.Text, "running") {
			t.Errorf("%s: says running while %s", tc.name, s.State)
		}
	}
}

// fakeSender answers every send with its result.
type fakeSender struct {
	status int
	err    error
	block  chan struct{}
}

func (f *fakeSender) Send(context.Context, *spool.Event) (int, string, error) {
	if f.block != nil {
		<-f.block
	}
	return f.status, "bad gateway", f.err
}

// TestDeliveryTracker: the wrapped sender's sends in flight, successes,
// failures with their reason, and the rate over the last minute.
func TestDeliveryTracker(t *testing.T) {
	var tr DeliveryTracker
	if tr.Wrap(nil) != nil {
		t.Fatal("Wrap(nil) must be nil: no sender")
	}
	ok := &fakeSender{status: 200, block: make(chan struct{})}
	snd := tr.Wrap(ok)
	done := make(chan struct{})
	go func() { _, _, _ = snd.Send(context.Background(), &spool.Event{ID: "a"}); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for tr.InFlight() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if tr.InFlight() != 1 {
		t.Fatalf("in flight %d, want 1", tr.InFlight())
	}
	close(ok.block)
	<-done
	f := tr.Facts(time.Now())
	if f.InFlight != 0 || f.LastSuccess.IsZero() || f.Delivered != 1 || f.Rate <= 0 || f.Progress.IsZero() {
		t.Errorf("after a delivery: %+v", f)
	}
	_, _, _ = tr.Wrap(&fakeSender{status: 502}).Send(context.Background(), &spool.Event{ID: "b"})
	_, _, _ = tr.Wrap(&fakeSender{err: errors.New("dial unix: refused\nx")}).Send(context.Background(), &spool.Event{ID: "c"})
	f = tr.Facts(time.Now())
	if f.Failed != 2 || !strings.HasPrefix(f.LastError, "gateway unreachable: dial unix: refused") || strings.Contains(f.LastError, "\n") {
		t.Errorf("after failures: %+v", f)
	}
	if old := tr.Facts(time.Now().Add(2 * time.Minute)); old.Rate != 0 {
		t.Errorf("the rate a minute later: %v, want 0", old.Rate)
	}
	// a send cut short by the spool stopping is no attempt
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _ = tr.Wrap(&fakeSender{status: 503}).Send(ctx, &spool.Event{ID: "d"})
	if tr.Facts(time.Now()).Failed != 2 {
		t.Error("a send cut short counted as a failed attempt")
	}
}

// TestGateNodes: the gate knows each live node's roles and level; a node
// that falls silent is kept as silent (with when it was last heard), one
// that leaves is forgotten, and one heard again is live again.
func TestGateNodes(t *testing.T) {
	g := NewGate(LevelClusterView, 0)
	a1, a2, b1, c1 := memberID{1}, memberID{2}, memberID{3}, memberID{4}
	g.set(a1, "edge-a", TopicLockout, 2)
	g.set(a2, "deliver-d", TopicDelivery, 2)
	g.set(b1, "deliver-d", TopicLockout, 2)
	g.set(c1, "old\x1bnode", TopicLockout, 0)
	byName := func() map[string]NodeInfo {
		out := map[string]NodeInfo{}
		for _, n := range g.Nodes() {
			out[n.Node] = n
		}
		return out
	}
	ns := byName()
	if d := ns["deliver-d"]; !d.Live() || !d.Has(TopicDelivery) || d.Level != 2 || len(d.Roles) != 2 {
		t.Errorf("the delivery node: %+v", d)
	}
	if o, ok := ns["old_node"]; !ok || o.Level != 0 {
		t.Errorf("the older node (its name made safe): %+v, known %v", o, ok)
	}
	g.lost(a2, b1) // frozen: silent in both roles
	ns = byName()
	if d := ns["deliver-d"]; d.Live() || !d.Has(TopicDelivery) || d.Seen.IsZero() {
		t.Errorf("the frozen delivery node: %+v", d)
	}
	if g.Level() != 0 {
		t.Errorf("level %d with an older node live", g.Level())
	}
	g.forget(c1) // it left
	if _, ok := byName()["old_node"]; ok {
		t.Error("a node that left is still listed")
	}
	g.set(a2, "deliver-d", TopicDelivery, 2) // heard again
	if d := byName()["deliver-d"]; !d.Live() || len(d.Silent) != 1 || d.Silent[0] != TopicLockout {
		t.Errorf("back in one role: %+v", d)
	}
	var none *Gate
	if none.Nodes() != nil {
		t.Error("a nil gate knows no nodes")
	}
}

// deliveryStates are the states a node may be in.
var deliveryStates = map[string]bool{DeliveryDelivering: true, DeliveryIdle: true, DeliveryPaused: true,
	DeliveryStalled: true, DeliveryDisconnected: true, DeliverySilent: true}
