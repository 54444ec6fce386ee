package natscluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

func TestProvisionCreatesStreamsBucketsConsumers(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	n := openNode(t, []string{srv.URL()}, "prov", queueParams(), func(c *Config) { c.DuplicateWindow = caddy.Duration(5 * time.Minute) })
	natstest.WaitFor(t, "backend up", n.b.Up)

	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := ctxT(t)
	q, err := js.Stream(ctx, "HOOKS_prov_QUEUE")
	if err != nil {
		t.Fatal(err)
	}
	qc := q.CachedInfo().Config
	if qc.Retention != jetstream.WorkQueuePolicy || qc.Duplicates != 5*time.Minute || qc.Discard != jetstream.DiscardNew {
		t.Errorf("queue stream config: retention %v, duplicates %v, discard %v", qc.Retention, qc.Duplicates, qc.Discard)
	}
	if _, err := js.Stream(ctx, "HOOKS_prov_DEAD"); err != nil {
		t.Error(err)
	}
	if kv, err := js.KeyValue(ctx, "hooks_prov_lanes"); err != nil {
		t.Error(err)
	} else if st, _ := kv.Status(ctx); st.TTL() != n.b.(*handle).queue.leaseTTL() {
		t.Errorf("bucket hooks_prov_lanes TTL %v, want the lease's %v", st.TTL(), n.b.(*handle).queue.leaseTTL())
	}
	for _, c := range []struct {
		name     string
		inFlight int
	}{{"wake", wakeBatch}, {"agent", maxAgentsInFlight}} {
		ci, err := js.Consumer(ctx, "HOOKS_prov_QUEUE", c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := ci.CachedInfo().Config.MaxAckPending; got != c.inFlight {
			t.Errorf("consumer %s: max ack pending %d, want %d", c.name, got, c.inFlight)
		}
	}
	for _, b := range []string{"hooks_prov_locks", "hooks_prov_idem"} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := kv.Status(ctx)
		if st.TTL() != time.Minute {
			t.Errorf("bucket %s TTL %v, want 1m", b, st.TTL())
		}
	}

	// a second open with another TTL updates the bucket instead of failing
	n2 := &NATS{Config: Config{URLs: []string{srv.URL()}, SigningKeys: []string{testSigningKey}}}
	if err := n2.Config.validate(); err != nil {
		t.Fatal(err)
	}
	b2, err := n2.Open(cluster.Params{Name: "prov", LockTTL: 2 * time.Minute, IdempotencyTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	kv, _ := js.KeyValue(ctx, "hooks_prov_locks")
	if st, _ := kv.Status(ctx); st.TTL() != 2*time.Minute {
		t.Errorf("lock bucket TTL after update %v, want 2m", st.TTL())
	}
}

func TestOpenFailsLoudlyWithoutJetStream(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{NoJetStream: true})
	n := &NATS{Config: Config{URLs: []string{srv.URL()}, SigningKeys: []string{testSigningKey}}}
	if err := n.Config.validate(); err != nil {
		t.Fatal(err)
	}
	_, err := n.Open(cluster.Params{Name: "nojs", LockTTL: time.Minute, IdempotencyTTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "no JetStream") {
		t.Fatalf("Open without JetStream: %v, want a JetStream error", err)
	}
}

func TestOpenRefusesWhatTheServerCannotDo(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	n := &NATS{Config: Config{URLs: []string{srv.URL()}, Replicas: 3, SigningKeys: []string{testSigningKey}}}
	if err := n.Config.validate(); err != nil {
		t.Fatal(err)
	}
	_, err := n.Open(cluster.Params{Name: "r3", LockTTL: time.Minute, IdempotencyTTL: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "hooks_r3_locks") {
		t.Fatalf("Open with 3 replicas on one server: %v, want an error naming the bucket", err)
	}
}

func TestTokenAuth(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{Token: "s3cret-token-for-the-test"})
	bad := &NATS{Config: Config{URLs: []string{srv.URL()}, Token: "wrong", Timeout: caddy.Duration(300 * time.Millisecond), SigningKeys: []string{testSigningKey}}}
	if err := bad.Config.validate(); err != nil {
		t.Fatal(err)
	}
	b, err := bad.Open(cluster.Params{Name: "auth", LockTTL: time.Minute, IdempotencyTTL: time.Minute})
	if err == nil {
		if b.Up() {
			t.Fatal("a wrong token connected")
		}
		_ = b.Close()
	}
	n := openNode(t, []string{srv.URL()}, "auth", nil, func(c *Config) { c.Token = "s3cret-token-for-the-test" })
	natstest.WaitFor(t, "authenticated backend up", n.b.Up)
}

func TestStartsWhileNATSIsDownAndProvisionsLater(t *testing.T) {
	srv := natstest.Run(t, natstest.Options{})
	proxy := natstest.NewProxy(t, "") // refuses until the test points it at the server
	n := openNode(t, []string{proxy.URL()}, "late", queueParams(), func(c *Config) { c.Timeout = caddy.Duration(200 * time.Millisecond) })
	if n.b.Up() {
		t.Fatal("up without a server")
	}
	if err := n.b.Queue().Publish(context.Background(), natstest.Events("late", "agent", 1)...); !errors.Is(err, cluster.ErrUnavailable) {
		t.Fatalf("publish while down: %v, want ErrUnavailable", err)
	}
	ups := make(chan bool, 4)
	stop := n.b.Watch(func(up bool) { ups <- up })
	defer stop()
	proxy.SetTarget(srv.Addr())
	select {
	case up := <-ups:
		if !up {
			t.Fatal("first state change was down")
		}
	case <-time.After(testTimeout):
		t.Fatal("never came up")
	}
	if err := n.b.Queue().Publish(ctxT(t), natstest.Events("late", "agent", 1)...); err != nil {
		t.Fatal(err)
	}
}
