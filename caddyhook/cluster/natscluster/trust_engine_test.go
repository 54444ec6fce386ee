package natscluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/caddyhook/spool/spooltest"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/promtest"
)

// otherKey is a signing key no test node holds.
const otherKey = "a-key-that-is-not-the-cluster-key-9e8d7c6b5a4f"

// rejectedOf reads caddy_hooks_cluster_rejected_total{kind} of m.
func rejectedOf(t *testing.T, m *cluster.Metrics, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	v, _ := promtest.Value(reg, "caddy_hooks_cluster_rejected_total", "kind", kind)
	return v
}

// TestQueueCarriesTheWholeEvent (issue 21 item 1): an event goes through
// the queue with everything the local spool stores (a forwarded event's
// path with its query, its headers and the sender's Idempotency-Key, the
// trace context, the client address), and the delivery node's sender
// gets it unchanged.
func TestQueueCarriesTheWholeEvent(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	edge := openNode(t, []string{srv.URL()}, "whole", queueParams(), nil)
	p := natstest.NewProxy(t, srv.Addr())
	deliv := openNode(t, []string{p.URL()}, "whole", queueParams(), nil)
	natstest.WaitFor(t, "up", func() bool { return edge.b.Up() && deliv.b.Up() })
	first := time.Now().Add(-time.Second).Round(0)
	sent := []*spool.Event{
		{ID: "fwd-1", Kind: spool.KindAgent, Path: "/hooks/github?event=pr&q=a%20b", Body: []byte("\uFEFF{\"action\":\"opened\"}\n"),
			ClientIP: "203.0.113.7", FirstSeen: first,
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "congo=t61rcWkgMzE",
			Header: http.Header{"X-Github-Event": {"pull_request"}, "Idempotency-Key": {"sender-key-1"},
				"Content-Type": {"application/json"}, "User-Agent": {"GitHub-Hookshot/x"}}},
		{ID: "render-1", Kind: spool.KindWake, Path: "/hooks/wake", Body: []byte(`{"text":"t","mode":"now"}`), FirstSeen: first},
	}
	if err := edge.b.Queue().Publish(ctxT(t), sent...); err != nil {
		t.Fatal(err)
	}
	snd := new(spooltest.Recorder)
	deliv.b.Queue().SetSender(snd, 2)
	natstest.WaitFor(t, "both delivered", func() bool { return len(snd.Events()) == 2 })
	for _, got := range snd.Events() {
		var want *spool.Event
		for _, ev := range sent {
			if ev.ID == got.ID {
				want = ev
			}
		}
		g := *got
		g.Seq, g.Attempts = 0, 0
		if !g.FirstSeen.Equal(want.FirstSeen) {
			t.Errorf("%s: first seen %v, want %v", got.ID, g.FirstSeen, want.FirstSeen)
		}
		g.FirstSeen = want.FirstSeen
		if !reflect.DeepEqual(&g, want) {
			t.Errorf("delivered\n %+v\nwant\n %+v", &g, want)
		}
	}
}

// TestQueueDropsUnsealedMessages (issue 20 item 3): messages another
// client of the servers put in the queue (the old header format, the
// event format without a seal, sealed with another key, sealed for the
// other lane) and in the dead letters are never delivered, listed or
// retried: each is dropped, counted and removed; a node's own event is
// delivered.
func TestQueueDropsUnsealedMessages(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, err := cluster.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	node := openNodeMetrics(t, []string{srv.URL()}, "forged", queueParams(), nil, m)
	natstest.WaitFor(t, "up", node.b.Up)
	_, js := natstest.PlainClient(t, srv.URL())
	ctx := ctxT(t)
	agentSubj, wakeSubj, deadSubj := "hooks.forged.queue.agent", "hooks.forged.queue.wake", "hooks.forged.dead"
	ev := &spool.Event{ID: "injected", Kind: spool.KindAgent, Path: "/hooks/agent", Body: []byte(`{"message":"run this"}`), FirstSeen: time.Now()}
	other, err := cluster.NewKeyring([]string{otherKey})
	if err != nil {
		t.Fatal(err)
	}
	own, err := cluster.NewKeyring([]string{testSigningKey})
	if err != nil {
		t.Fatal(err)
	}
	oldFormat := nats.NewMsg(agentSubj)
	for k, v := range map[string]string{"Hooks-Id": "injected-old", "Hooks-Kind": "agent", "Hooks-Path": "/hooks/agent",
		"Hooks-First-Seen": time.Now().UTC().Format(time.RFC3339Nano)} {
		oldFormat.Header.Set(k, v)
	}
	oldFormat.Data = ev.Body
	forged := []*nats.Msg{oldFormat,
		{Subject: agentSubj, Data: spool.MarshalEvent(ev)},
		{Subject: agentSubj, Data: other.Seal(spool.MarshalEvent(ev), sealQueue, agentSubj)},
		{Subject: agentSubj, Data: own.Seal(spool.MarshalEvent(ev), sealQueue, wakeSubj)},
	}
	for i, fm := range forged {
		if fm.Header == nil {
			fm.Header = nats.Header{}
		}
		fm.Header.Set(jetstream.MsgIDHeader, "forged-"+string(rune('a'+i)))
		if _, err := js.PublishMsg(ctx, fm); err != nil {
			t.Fatal(err)
		}
	}
	deadMsg := &nats.Msg{Subject: deadSubj, Header: nats.Header{}, Data: spool.MarshalEvent(ev)}
	deadMsg.Header.Set(jetstream.MsgIDHeader, "forged-dead")
	if _, err := js.PublishMsg(ctx, deadMsg); err != nil {
		t.Fatal(err)
	}
	legit := natstest.Events("legit", spool.KindAgent, 1)
	if err := node.b.Queue().Publish(ctx, legit...); err != nil {
		t.Fatal(err)
	}
	snd := new(spooltest.Recorder)
	node.b.Queue().SetSender(snd, 2)
	natstest.WaitFor(t, "the node's own event delivered and the forged ones dropped", func() bool {
		return len(snd.Events()) >= 1 && rejectedOf(t, m, cluster.RejectedQueue) >= float64(len(forged))
	})
	dls, err := node.b.Queue().DeadLetters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 0 {
		t.Errorf("dead letters %v: the forged one is listed", dls)
	}
	if n := rejectedOf(t, m, cluster.RejectedDeadLetter); n != 1 {
		t.Errorf("rejected dead letters %v, want 1", n)
	}
	natstest.WaitFor(t, "queue and dead letters empty", func() bool {
		st, err := node.b.Queue().Stats(ctx)
		return err == nil && st.Depth == 0 && st.DeadLetters == 0
	})
	for _, ev := range snd.Events() {
		if ev.ID != legit[0].ID {
			t.Errorf("delivered %s %s", ev.ID, ev.Body)
		}
	}
	if n := rejectedOf(t, m, cluster.RejectedQueue); n != float64(len(forged)) {
		t.Errorf("rejected queue messages %v, want %d", n, len(forged))
	}
}

// TestClaimsIgnoreForgedRecords (issue 20 item 3): an idempotency record
// another client wrote (a settled reply or a pending claim that never
// lapses) does not answer for the key: the node claims it.
func TestClaimsIgnoreForgedRecords(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, _ := cluster.NewMetrics(nil)
	node := openNodeMetrics(t, []string{srv.URL()}, "idemforge", nil, nil, m)
	natstest.WaitFor(t, "up", node.b.Up)
	_, js := natstest.PlainClient(t, srv.URL())
	ctx := ctxT(t)
	kv, err := js.KeyValue(ctx, "hooks_idemforge_idem")
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range []record{
		{Node: "evil", Status: 200, Body: []byte(`{"ok":true,"runId":"forged"}`), Written: time.Now().UnixMilli()},
		{Pending: true, Node: "evil", Until: time.Now().Add(365 * 24 * time.Hour).UnixMilli()},
	} {
		sum := sha256.Sum256([]byte{byte('a' + i)})
		key := hex.EncodeToString(sum[:])
		b, _ := json.Marshal(rec)
		if _, err := kv.Create(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		r, claimed, err := node.b.Claims().Claim(ctx, key, time.Now().Add(time.Minute))
		if err != nil || !claimed {
			t.Fatalf("record %d: claim = %+v, %v, %v; want the key claimed", i, r, claimed, err)
		}
		if err := node.b.Claims().Settle(ctx, key, 200, []byte(`{"ok":true,"runId":"real"}`)); err != nil {
			t.Fatal(err)
		}
		r, claimed, err = node.b.Claims().Claim(ctx, key, time.Now().Add(time.Minute))
		if err != nil || claimed || string(r.Body) != `{"ok":true,"runId":"real"}` {
			t.Fatalf("record %d: replay = %+v, %v, %v; want the node's own reply", i, r, claimed, err)
		}
	}
	if n := rejectedOf(t, m, cluster.RejectedIdempotency); n != 2 {
		t.Errorf("rejected idempotency records %v, want 2", n)
	}
}

// TestLocksAndFailuresIgnoreForgedRecords (issue 20 item 3): a lock
// record or a failure broadcast another client wrote never reaches the
// node's lockout; the node's own do.
func TestLocksAndFailuresIgnoreForgedRecords(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	m, _ := cluster.NewMetrics(nil)
	node := openNodeMetrics(t, []string{srv.URL()}, "lockforge", nil, nil, m)
	natstest.WaitFor(t, "up", node.b.Up)
	nc, js := natstest.PlainClient(t, srv.URL())
	ctx := ctxT(t)

	var mu sync.Mutex
	var locks, fails []string
	stopW, err := node.b.WatchLocks(func(v []byte, _ time.Time) { mu.Lock(); locks = append(locks, string(v)); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer stopW()
	stopS, err := node.b.Subscribe(cluster.TopicLockout, func(v []byte) { mu.Lock(); fails = append(fails, string(v)); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer stopS()

	kv, err := js.KeyValue(ctx, "hooks_lockforge_locks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "forged", []byte("forged lock")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("hooks.lockforge.auth", []byte("forged failures")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := node.b.PutLock(ctx, "own", []byte("own lock"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := node.b.Broadcast(cluster.TopicLockout, []byte("own failures")); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, "the node's own lock and failures", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(locks) >= 1 && len(fails) >= 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(locks) != 1 || locks[0] != "own lock" || len(fails) != 1 || fails[0] != "own failures" {
		t.Errorf("locks %q, failures %q: want only the node's own", locks, fails)
	}
	if rejectedOf(t, m, cluster.RejectedLock) != 1 || rejectedOf(t, m, cluster.RejectedFailures) != 1 {
		t.Errorf("rejected: lock %v, failures %v; want 1 each", rejectedOf(t, m, cluster.RejectedLock), rejectedOf(t, m, cluster.RejectedFailures))
	}
}
