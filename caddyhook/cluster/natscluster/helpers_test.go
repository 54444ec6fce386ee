package natscluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 30 * time.Second

// node is one caddyhook process's view of the cluster: its own
// connection (distinct URL order or proxy, hence its own pool entry).
type node struct {
	eng *NATS
	b   cluster.Backend
}

// openNode connects a node to urls with namespace name.
func openNode(t *testing.T, urls []string, name string, q *cluster.QueueParams, mod func(*Config)) *node {
	t.Helper()
	n := &NATS{Config: Config{URLs: urls, Timeout: caddy.Duration(2 * time.Second), AckWait: caddy.Duration(2 * time.Second)}}
	if mod != nil {
		mod(&n.Config)
	}
	if err := n.Config.validate(); err != nil {
		t.Fatal(err)
	}
	n.logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	b, err := n.Open(cluster.Params{Name: name, LockTTL: time.Minute, IdempotencyTTL: time.Minute, Queue: q})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = n.Cleanup() })
	return &node{eng: n, b: b}
}

// rotate returns urls starting at i, so each node has its own order.
func rotate(urls []string, i int) []string {
	i %= len(urls)
	return append(slices.Clone(urls[i:]), urls[:i]...)
}

// waitFor polls cond until it holds or the test deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// gateway records deliveries by event id; respond decides each answer.
type gateway struct {
	mu      sync.Mutex
	got     map[string]int
	order   []string
	respond func(ev *spool.Event, attempt int) (int, string, error)
}

func newGateway() *gateway { return &gateway{got: make(map[string]int)} }

// Send implements spool.Sender.
func (g *gateway) Send(ctx context.Context, ev *spool.Event) (int, string, error) {
	g.mu.Lock()
	attempt := g.got[ev.ID]
	g.mu.Unlock()
	status, reason, err := http.StatusOK, "", error(nil)
	if g.respond != nil {
		status, reason, err = g.respond(ev, attempt)
	}
	g.mu.Lock()
	g.got[ev.ID]++
	if status >= 200 && status < 300 && err == nil {
		g.order = append(g.order, ev.ID)
	}
	g.mu.Unlock()
	return status, reason, err
}

// delivered is the number of distinct ids answered 2xx.
func (g *gateway) delivered() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range g.order {
		seen[id] = true
	}
	return len(seen)
}

// doubled counts ids delivered (2xx) more than once.
func (g *gateway) doubled() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := map[string]int{}
	d := 0
	for _, id := range g.order {
		n[id]++
		if n[id] == 2 {
			d++
		}
	}
	return d
}

// attempts is how often id was sent.
func (g *gateway) attempts(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got[id]
}

func (g *gateway) deliveredOrder() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// events builds n events of kind with ids prefix-0…prefix-(n-1).
func events(prefix, kind string, n int) []*spool.Event {
	out := make([]*spool.Event, n)
	for i := range out {
		out[i] = &spool.Event{ID: fmt.Sprintf("%s-%03d", prefix, i), Kind: kind, Path: "/hooks/" + kind,
			Body: fmt.Appendf(nil, `{"n":%d}`, i), FirstSeen: time.Now()}
	}
	return out
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
