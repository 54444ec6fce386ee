package natscluster

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/caddyhook/spool/spooltest"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// legacyMsg is a message as a release without signing_key wrote it:
// the event in headers, the body as data.
func legacyMsg(subject, id, kind string, first time.Time, body string, extra ...string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(legacyID, id)
	m.Header.Set(legacyKind, kind)
	m.Header.Set(legacyPath, "/hooks/"+kind)
	m.Header.Set(legacyClientIP, "203.0.113.9")
	m.Header.Set(legacyFirstSeen, first.UTC().Format(time.RFC3339Nano))
	for i := 0; i+1 < len(extra); i += 2 {
		m.Header.Set(extra[i], extra[i+1])
	}
	m.Data = []byte(body)
	return m
}

// TestAcceptUnsealedUntil (issue 30 item 3): a node with signing_key and
// accept_unsealed_until in the future reads what a release without
// signing_key queued (events delivered with every field), its dead
// letters (listed, retried and delivered; one it made of a sealed event
// it could not read is restored to that event) and its idempotency
// records (a settled reply answers, a pending claim holds the key); once
// the time has passed, the same records are refused as any that does
// not open.
func TestAcceptUnsealedUntil(t *testing.T) {
	first := time.Now().Add(-time.Minute).Round(time.Millisecond)
	for _, tc := range []struct {
		name   string
		until  time.Time
		accept bool
	}{
		{"before the time", time.Now().Add(time.Hour), true},
		{"after the time", time.Now().Add(-time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Run(t, natstest.Options{})
			m, reg := metricsOf(t)
			name := "legacy" + map[bool]string{true: "a", false: "b"}[tc.accept]
			n := openNodeMetrics(t, []string{srv.URL()}, name, queueParams(), func(c *Config) {
				c.AcceptUnsealedUntil = tc.until.UTC().Format(time.RFC3339)
			}, m)
			natstest.WaitFor(t, "up", n.b.Up)
			s := n.b.(*handle).shared
			ctx := ctxT(t)
			_, js := natstest.PlainClient(t, srv.URL())

			// what the old release wrote: two queued events, a dead letter, a
			// dead letter made of a sealed event it could not read
			kept := &spool.Event{ID: "sealed-by-a-new-node", Kind: spool.KindAgent, Path: "/hooks/agent", Body: []byte(`{"message":"kept"}`),
				FirstSeen: first}
			msgs := []*nats.Msg{
				legacyMsg(s.n.queueAgent, "old-agent", spool.KindAgent, first, `{"message":"queued by the old release"}`),
				legacyMsg(s.n.queueWake, "old-wake", spool.KindWake, first, `{"text":"wake from the old release","mode":"now"}`),
				legacyMsg(s.n.dead, "old-dead", spool.KindAgent, first, `{"message":"dead in the old release"}`,
					legacyReason, "gateway status 400: no", "Hooks-Status", "400", legacyAttempts, "3"),
				legacyMsg(s.n.dead, "unreadable-7", spool.KindAgent, first, string(s.seal(spool.MarshalEvent(kept), sealQueue, s.n.queueAgent)),
					legacyReason, "unreadable queued message", "Hooks-Status", "0", legacyAttempts, "0"),
			}
			msgs[3].Header.Set(legacyPath, "?")
			for _, msg := range msgs {
				if msg.Subject == s.n.dead {
					msg.Header.Set(jetstream.MsgIDHeader, msg.Header.Get(legacyID)+".dead.1")
				}
				if _, err := js.PublishMsg(ctx, msg); err != nil {
					t.Fatal(err)
				}
			}
			idem, err := js.KeyValue(ctx, s.n.idem)
			if err != nil {
				t.Fatal(err)
			}
			settledKey, pendingKey := strings.Repeat("a1", 32), strings.Repeat("b2", 32)
			if _, err := idem.Create(ctx, settledKey, []byte(`{"n":"old-node","s":200,"b":"eyJvayI6dHJ1ZSwicnVuSWQiOiJvbGQifQ=="}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := idem.Create(ctx, pendingKey, []byte(`{"p":true,"n":"old-node","u":`+
				itoa(time.Now().Add(time.Hour).UnixMilli())+`}`)); err != nil {
				t.Fatal(err)
			}

			snd := new(spooltest.Recorder)
			n.b.Queue().SetSender(snd, 2)
			if !tc.accept {
				natstest.WaitFor(t, "the unsealed queued events refused", func() bool {
					return counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedQueue) == 2
				})
				dls, err := n.b.Queue().DeadLetters(ctx)
				if err != nil || len(dls) != 0 || len(snd.Events()) != 0 {
					t.Errorf("after the time: dead letters %v (%v), delivered %v; want none", dls, err, snd.Events())
				}
				if _, claimed, err := n.b.Claims().Claim(ctx, settledKey, time.Now().Add(time.Minute)); !claimed || err != nil {
					t.Errorf("after the time an unsealed settled record still answers (claimed %v, %v)", claimed, err)
				}
				return
			}
			natstest.WaitFor(t, "the old release's queued events delivered", func() bool { return len(snd.Events()) == 2 })
			for _, ev := range snd.Events() {
				want := map[string]string{"old-agent": `{"message":"queued by the old release"}`, "old-wake": `{"text":"wake from the old release","mode":"now"}`}[ev.ID]
				if string(ev.Body) != want || ev.ClientIP != "203.0.113.9" || !ev.FirstSeen.Equal(first) || ev.Path != "/hooks/"+ev.Kind {
					t.Errorf("delivered %+v", ev)
				}
			}
			dls, err := n.b.Queue().DeadLetters(ctx)
			if err != nil || len(dls) != 2 {
				t.Fatalf("dead letters %v, %v; want the old one and the restored one", dls, err)
			}
			got := map[string]*spool.Event{}
			for _, d := range dls {
				got[d.ID] = d
			}
			if d := got["old-dead"]; d == nil || d.LastError != "gateway status 400: no" || d.Attempts != 3 || !d.FirstSeen.Equal(first) {
				t.Errorf("the old dead letter: %+v", d)
			}
			if d := got[kept.ID]; d == nil || string(d.Body) != string(kept.Body) || !strings.Contains(d.LastError, "kept by a node without signing_key") {
				t.Errorf("the restored dead letter: %+v", d)
			}
			if k, err := n.b.Queue().Retry(ctx); k != 2 || err != nil {
				t.Fatalf("retry: %d, %v", k, err)
			}
			natstest.WaitFor(t, "the retried dead letters delivered", func() bool { return len(snd.Events()) == 4 })
			rec, claimed, err := n.b.Claims().Claim(ctx, settledKey, time.Now().Add(time.Minute))
			if claimed || err != nil || rec.Pending || string(rec.Body) != `{"ok":true,"runId":"old"}` {
				t.Errorf("the old release's settled reply: %+v claimed %v, %v; want it answered", rec, claimed, err)
			}
			rec, claimed, err = n.b.Claims().Claim(ctx, pendingKey, time.Now().Add(time.Minute))
			if claimed || err != nil || !rec.Pending || rec.Node != "old-node" {
				t.Errorf("the old release's pending claim: %+v claimed %v, %v; want it held", rec, claimed, err)
			}
			if r := counter(reg, "caddy_hooks_cluster_rejected_total", "kind", cluster.RejectedQueue); r != 0 {
				t.Errorf("%v queued messages rejected", r)
			}
		})
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
