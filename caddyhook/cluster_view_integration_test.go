package caddyhook

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// viewOf is node's admin route with ?scope=cluster (and the node's
// handler selected).
func (c *clusterNodes) viewOf(node int, route string, extra ...string) string {
	q := url.Values{"path": {"/hooks"}, "server": {c.servers[node]}, "scope": {adminapi.ScopeCluster}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/hooks/" + route + "?" + q.Encode()
}

// clusterList is node's cluster-wide list.
func (c *clusterNodes) clusterList(t *testing.T, node int, extra ...string) (page adminapi.ClusterPage, events []eventlog.EventJSON) {
	t.Helper()
	code, body := adminCall(t, http.MethodGet, c.viewOf(node, "events", extra...), "")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("cluster list on node %d: %d %s", node, code, body)
	}
	for _, raw := range page.Entries {
		var e eventlog.EventJSON
		if json.Unmarshal(raw, &e) == nil && e.Type != "rejections" {
			events = append(events, e)
		}
	}
	return page, events
}

// TestClusterView (issue 32 item 1): three nodes, two edges and a
// delivery node, each its own engine connection: the list asked of any
// node holds the events accepted on both edges, each with its node, and
// says that every node answered; an event accepted on one edge opens on
// another; the rates add up; a node cut from NATS is named as not
// answering, and the others are still answered at once (within the
// wait, never more).
func TestClusterView(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	c, names := startViewNodes(t, gw, "retry_initial 50ms\n retry_max 200ms")

	ids := map[string]string{} // event id → the node that accepted it
	for i := range 2 {
		for k := range 3 {
			ids[runIDOf(t, c.nodes[i].post("/hooks/agent", fmt.Sprintf(`{"message":"edge %d event %d"}`, i, k)))] = names[i]
		}
	}
	for _, from := range []int{0, 1, 2} {
		page, events := c.clusterList(t, from, "status", "accepted")
		got := map[string]string{}
		for _, e := range events {
			got[e.ID] = e.Node
		}
		for id, node := range ids {
			if got[id] != node {
				t.Errorf("asked of node %d: event %s listed with node %q, want %q (page %+v)", from, id, got[id], node, page.Nodes)
			}
		}
		if len(page.Nodes.Answered) != 3 || page.Nodes.Asked != 3 || len(page.Nodes.Missing) != 0 {
			t.Errorf("asked of node %d: nodes %+v, want 3 of 3", from, page.Nodes)
		}
		for i := 1; i < len(events); i++ {
			if events[i].Time.After(events[i-1].Time) {
				t.Errorf("asked of node %d: not newest first at %d", from, i)
			}
		}
	}

	// the next page: by time, across nodes, nothing twice, nothing lost
	first, _ := c.clusterList(t, 2, "status", "accepted", "limit", "4")
	if first.Next == "" || len(first.Entries) != 4 {
		t.Fatalf("a page of 4 of 6: %d entries, next %q", len(first.Entries), first.Next)
	}
	_, rest := c.clusterList(t, 2, "status", "accepted", "before", first.Next)
	if len(rest) != 2 {
		t.Errorf("the next page holds %d events, want 2", len(rest))
	}

	// an event of node 0 opened through node 1
	var one string
	for id, node := range ids {
		if node == names[0] {
			one = id
		}
	}
	code, body := adminCall(t, http.MethodGet, c.viewOf(1, "events/"+one), "")
	var ev eventlog.EventJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ev) != nil || ev.ID != one || ev.Node != names[0] {
		t.Fatalf("node 0's event through node 1: %d %s", code, body)
	}
	code, body = adminCall(t, http.MethodGet, c.viewOf(1, "events/00000000-0000-0000-0000-000000000000"), "")
	if code != http.StatusNotFound || !strings.Contains(body, "3 of 3 nodes answered") {
		t.Errorf("an unknown event: %d %s", code, body)
	}

	// the rates add up
	code, body = adminCall(t, http.MethodGet, c.viewOf(2, "events/rates"), "")
	var rates clusterRates
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rates) != nil {
		t.Fatalf("rates: %d %s", code, body)
	}
	var sum float64
	for _, v := range rates.Accepted {
		sum += v
	}
	if got := sum * float64(rates.StepSeconds); got < 5.5 || got > 6.5 || len(rates.Nodes.Answered) != 3 {
		t.Errorf("cluster rates count %.1f accepted over %+v, want 6", got, rates.Nodes)
	}

	// node 1 cut from NATS: named, not waited for past the wait
	c.proxies[1].Blackhole(true)
	defer c.proxies[1].Blackhole(false)
	start := time.Now()
	page, events := c.clusterList(t, 0, "status", "accepted")
	if took := time.Since(start); took > viewWait+2*time.Second {
		t.Errorf("the list took %s with a node cut off; the wait is %s", took, viewWait)
	}
	if !slices.ContainsFunc(page.Nodes.Missing, func(m adminapi.MissingNode) bool { return m.Node == names[1] }) ||
		len(page.Nodes.Answered) != 2 {
		t.Errorf("with node 1 cut off: nodes %+v, want node 1 (%s) named as not answering", page.Nodes, names[1])
	}
	for _, e := range events {
		if e.Node == names[1] {
			t.Errorf("node 1's event %s listed while it is cut off", e.ID)
		}
	}
}

// startViewNodes starts two edges and a delivery node (its spool lines
// deliver), each knowing the others, and returns their node names.
func startViewNodes(t *testing.T, gw *testGateway, deliver string) (*clusterNodes, []string) {
	t.Helper()
	c := startEdgesAndDeliverer(t, 3, gw, deliver)
	names := make([]string, 3)
	for i := range names {
		names[i] = c.handler(t, i).cluster.node()
	}
	waitViewNodes(t, c, 3)
	return c, names
}

// waitViewNodes waits until every node's memberships know the n nodes.
func waitViewNodes(t *testing.T, c *clusterNodes, n int) {
	t.Helper()
	for i := range c.nodes {
		h := c.handler(t, i)
		testkit.WaitForState(t, func() string { return fmt.Sprintf("node %d knows %d other nodes", i, n-1) }, func() bool {
			live := 0
			for _, g := range h.cluster.gate().Nodes() {
				if g.Live() && g.Node != h.cluster.node() {
					live++
				}
			}
			return live == n-1
		})
	}
}

// TestClusterDeliveryHealth (issue 32 item 2): from an edge, the delivery
// node is listed with its state, its last success and last error; paused,
// delivery is said paused, not running.
func TestClusterDeliveryHealth(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	c := startEdgesAndDeliverer(t, 2, gw, "retry_initial 50ms\n retry_max 200ms")
	deliverer := c.handler(t, 1).cluster.node()
	waitViewNodes(t, c, 2)
	health := func() adminapi.Delivery {
		code, body := adminCall(t, http.MethodGet, c.viewOf(0, "spool/delivery"), "")
		var d adminapi.Delivery
		if code != http.StatusOK || json.Unmarshal([]byte(body), &d) != nil {
			t.Fatalf("delivery health: %d %s", code, body)
		}
		return d
	}
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"delivered"}`))
	c.waitClusterState(t, 0, id, eventlog.StateDelivered)
	gw.FailWith(func(string) int { return http.StatusBadGateway })
	runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"retried"}`))
	var d adminapi.Delivery
	testkit.WaitForState(t, func() string { return fmt.Sprintf("delivery health %+v", d) }, func() bool {
		d = health()
		return len(d.Nodes) == 1 && d.Nodes[0].LastError != ""
	})
	n := d.Nodes[0]
	if n.Node != deliverer || !n.Answered || n.LastSuccess.IsZero() || !strings.Contains(n.LastError, "gateway status 502") ||
		(n.State != cluster.DeliveryDelivering && n.State != cluster.DeliveryIdle) || d.Summary.State != cluster.DeliveryRunning {
		t.Errorf("delivery node %+v, summary %+v", n, d.Summary)
	}
	gw.FailWith(nil)

	// paused: not running
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/pause?path=/hooks&server="+c.servers[1], ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("delivery health %+v", d) }, func() bool {
		d = health()
		return d.Summary.State == cluster.DeliveryPaused && len(d.Nodes) == 1 && d.Nodes[0].State == cluster.DeliveryPaused
	})
	if !strings.Contains(d.Summary.Text, "paused") || strings.Contains(d.Summary.Text, "running") {
		t.Errorf("paused summary %q", d.Summary.Text)
	}
	// the pause is an operator's action in the event log
	code, body := adminCall(t, http.MethodGet, "/hooks/events?status=operator&path=/hooks&server="+c.servers[1], "")
	if code != http.StatusOK || !strings.Contains(body, `"action":"pause"`) || !strings.Contains(body, `"operator":"admin API"`) {
		t.Errorf("the pause in node 1's log: %d %s", code, body)
	}
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/resume?path=/hooks&server="+c.servers[1], ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}

	// the delivery node cut off (silent, as a frozen process): with events
	// queued it is stalled within ack_wait (5s) and a few seconds, and
	// delivery is not said to run; back, it delivers again
	c.proxies[1].Blackhole(true)
	cut := time.Now()
	for k := range 3 {
		runIDOf(t, c.nodes[0].post("/hooks/agent", fmt.Sprintf(`{"message":"while cut %d"}`, k)))
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("delivery health %+v", d) }, func() bool {
		d = health()
		return len(d.Nodes) == 1 && d.Nodes[0].State == cluster.DeliveryStalled
	})
	if took := time.Since(cut); took > 5*time.Second+viewWait+5*time.Second {
		t.Errorf("stalled after %s; ack_wait is 5s", took)
	}
	if d.Summary.State != cluster.DeliveryStalled || strings.Contains(d.Summary.Text, "running") {
		t.Errorf("with the only delivery node stalled: %+v", d.Summary)
	}
	c.proxies[1].Blackhole(false)
	testkit.WaitForState(t, func() string { return fmt.Sprintf("delivery health %+v", d) }, func() bool {
		d = health()
		return d.Summary.State == cluster.DeliveryRunning && len(d.Nodes) == 1 && d.Nodes[0].Answered
	})
}

// TestClusterViewTail (issue 32 items 1 and 5): a live tail asked of one
// node streams the events of every node, each with its node, and says
// which nodes follow; a node cut off is named in a "nodes" message and
// the tail goes on with the others.
func TestClusterViewTail(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	c, names := startViewNodes(t, gw, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := newSSERecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequest(http.MethodGet, c.viewOf(2, "events/stream"), nil).WithContext(ctx)
		_ = (&adminAPI{}).serve(pw, req)
	}()
	nodesSaid := func(pred func(adminapi.Nodes) bool) func() bool {
		return func() bool {
			for _, m := range pr.messages("nodes") {
				var n adminapi.Nodes
				if json.Unmarshal([]byte(m), &n) == nil && pred(n) {
					return true
				}
			}
			return false
		}
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("a nodes message with 3 nodes: %q", pr.messages("nodes")) },
		nodesSaid(func(n adminapi.Nodes) bool { return len(n.Answered) == 3 }))
	seen := func(id, node string) func() bool {
		return func() bool {
			for _, m := range pr.messages("event") {
				var e eventlog.EventJSON
				if json.Unmarshal([]byte(m), &e) == nil && e.ID == id && e.Node == node {
					return true
				}
			}
			return false
		}
	}
	for i := range 2 {
		id := runIDOf(t, c.nodes[i].post("/hooks/agent", fmt.Sprintf(`{"message":"tail %d"}`, i)))
		testkit.WaitForState(t, func() string { return fmt.Sprintf("node %d's event %s in node 2's cluster tail", i, id) }, seen(id, names[i]))
	}
	c.proxies[1].Blackhole(true)
	defer c.proxies[1].Blackhole(false)
	testkit.WaitForState(t, func() string { return fmt.Sprintf("node 1 named as missing: %q", pr.messages("nodes")) },
		nodesSaid(func(n adminapi.Nodes) bool {
			return slices.ContainsFunc(n.Missing, func(m adminapi.MissingNode) bool { return m.Node == names[1] })
		}))
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"after the cut"}`))
	testkit.WaitForState(t, func() string { return "node 0's event after node 1 was cut" }, seen(id, names[0]))
	cancel()
	<-done
}

// sseRecorder is an http.ResponseWriter that keeps the Server-Sent
// Events written to it, by type.
type sseRecorder struct {
	mu   sync.Mutex
	hdr  http.Header
	buf  strings.Builder
	code int
}

func newSSERecorder() (*sseRecorder, *sseRecorder) {
	r := &sseRecorder{hdr: http.Header{}}
	return r, r
}

func (r *sseRecorder) Header() http.Header { return r.hdr }
func (r *sseRecorder) WriteHeader(code int) {
	r.mu.Lock()
	r.code = code
	r.mu.Unlock()
}
func (r *sseRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(b)
}
func (r *sseRecorder) Flush() {}

// messages returns the data of every message of type typ so far.
func (r *sseRecorder) messages(typ string) []string {
	r.mu.Lock()
	text := r.buf.String()
	r.mu.Unlock()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	cur := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur = line[len("event: "):]
		case strings.HasPrefix(line, "data: ") && cur == typ:
			out = append(out, line[len("data: "):])
		case line == "":
			cur = ""
		}
	}
	return out
}
