package natscluster

import (
	"context"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 30 * time.Second

// testSigningKey is the signing key of the test nodes.
const testSigningKey = "natscluster-test-signing-key-5e0c9b8a7f6d4e3c2b1a"

// node is one caddyhook process's view of the cluster: its own
// connection (distinct URL order or proxy, hence its own pool entry).
type node struct {
	eng *NATS
	b   cluster.Backend
}

// openNode connects a node to urls with namespace name.
func openNode(t *testing.T, urls []string, name string, q *cluster.QueueParams, mod func(*Config)) *node {
	t.Helper()
	return openNodeMetrics(t, urls, name, q, mod, nil)
}

// openNodeMetrics is openNode counting on m.
func openNodeMetrics(t *testing.T, urls []string, name string, q *cluster.QueueParams, mod func(*Config), m *cluster.Metrics) *node {
	t.Helper()
	n := &NATS{Config: Config{URLs: urls, Timeout: caddy.Duration(2 * time.Second), AckWait: caddy.Duration(2 * time.Second),
		SigningKeys: []string{testSigningKey}}}
	if mod != nil {
		mod(&n.Config)
	}
	if err := n.Config.validate(); err != nil {
		t.Fatal(err)
	}
	n.logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	b, err := n.Open(cluster.Params{Name: name, LockTTL: time.Minute, IdempotencyTTL: time.Minute, Queue: q, Metrics: m})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = n.Cleanup() })
	return &node{eng: n, b: b}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// queueParams are fast retries for tests.
func queueParams() *cluster.QueueParams {
	return &cluster.QueueParams{RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAge: time.Hour}
}
