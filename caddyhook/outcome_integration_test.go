package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// clusterEvent is node's GET /hooks/events/<id> through the admin API.
func (c *clusterNodes) clusterEvent(t *testing.T, node int, id string) eventlog.EventJSON {
	t.Helper()
	code, body := adminCall(t, http.MethodGet, "/hooks/events/"+url.PathEscape(id)+"?path=/hooks&server="+c.servers[node], "")
	var ev eventlog.EventJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ev) != nil || len(ev.Dispatch) == 0 {
		t.Fatalf("event %s on node %d: %d %s", id, node, code, body)
	}
	return ev
}

// waitClusterState waits until node's event id is in state.
func (c *clusterNodes) waitClusterState(t *testing.T, node int, id, state string) eventlog.Dispatch {
	t.Helper()
	var ev eventlog.EventJSON
	testkit.WaitForState(t, func() string {
		return fmt.Sprintf("node %d: event %s is %q, want %q (%+v)", node, id, ev.State, state, ev.Dispatch)
	},
		func() bool { ev = c.clusterEvent(t, node, id); return ev.State == state })
	return ev.Dispatch[0]
}

// startEdgesAndDeliverer starts n cluster nodes (connected) of which the
// last one, with the spool lines deliver, delivers to gw and the others
// are edges with deliver off; all with fallback reject.
func startEdgesAndDeliverer(t *testing.T, n int, gw *testGateway, deliver string) *clusterNodes {
	t.Helper()
	c := startClusterNodes(t, n, func(i int, url string) string {
		if i == n-1 {
			return "gateway unix/" + gw.sock + "\n" + clusterLines(url) + "\nspool cluster {\n fallback reject\n " + deliver + "\n}"
		}
		return clusterLines(url) + "\nspool cluster {\n deliver off\n fallback reject\n}"
	})
	c.waitUp(t)
	return c
}

// TestClusterEventOutcomeReachesAcceptingNode (issue 22 follow-up): with
// `spool cluster`, the edge that accepts an event (deliver off) shows
// what became of it although another node delivers it: delivered with the
// attempts, the gateway's status, its run id and the delivering node; a
// gateway refusal as dead; a dead letter retried through a third node's
// admin API as queued, then delivered. (On main the edge's event stays
// "queued": the outcome is recorded only in the delivering node's log.)
func TestClusterEventOutcomeReachesAcceptingNode(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	c := startEdgesAndDeliverer(t, 3, gw, "retry_initial 50ms\n retry_max 200ms")
	deliverer := c.handler(t, 2).cluster.backend.Node()
	runIDAt := func(id string) string {
		for _, r := range gw.Received() {
			if r.IdempotencyKey == id && r.Status == http.StatusOK {
				return r.RunID
			}
		}
		return ""
	}

	// delivered by node 2, shown on node 0
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"delivered elsewhere"}`))
	d := c.waitClusterState(t, 0, id, eventlog.StateDelivered)
	if want := runIDAt(id); d.Attempts != 1 || d.GatewayStatus != http.StatusOK || d.RunID == "" || d.RunID != want || d.Node != deliverer {
		t.Errorf("node 0's delivered event: %+v; want 1 attempt, gateway status 200, run id %q, node %q", d, want, deliverer)
	}

	// refused by the gateway: dead on node 0
	gw.FailWith(func(string) int { return http.StatusBadRequest })
	dead := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"refused by the gateway"}`))
	d = c.waitClusterState(t, 0, dead, eventlog.StateDead)
	if d.Attempts != 1 || d.GatewayStatus != http.StatusBadRequest || !strings.Contains(d.Error, "gateway status 400") || d.Node != deliverer {
		t.Errorf("node 0's dead event: %+v; want 1 attempt, gateway status 400 with its error line, node %q", d, deliverer)
	}
	gw.FailWith(nil)

	// retried through node 1 while node 2 is paused: queued on node 0,
	// then, resumed, delivered
	sel1, sel2 := "?path=/hooks&server="+c.servers[1], "?path=/hooks&server="+c.servers[2]
	testkit.WaitForState(t, func() string { return "the dead letter listed on node 1" }, func() bool {
		code, body := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel1, "")
		return code == http.StatusOK && strings.Contains(body, dead)
	})
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/pause"+sel2, ""); code != http.StatusOK {
		t.Fatalf("pause node 2: %d %s", code, body)
	}
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/dead/retry"+sel1, `{"ids":["`+dead+`"]}`); code != http.StatusOK || !strings.Contains(body, `"retried":1`) {
		t.Fatalf("retry on node 1: %d %s", code, body)
	}
	c.waitClusterState(t, 0, dead, eventlog.StateQueued)
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/resume"+sel2, ""); code != http.StatusOK {
		t.Fatalf("resume node 2: %d %s", code, body)
	}
	d = c.waitClusterState(t, 0, dead, eventlog.StateDelivered)
	if want := runIDAt(dead); d.GatewayStatus != http.StatusOK || d.RunID != want || d.Error != "" || d.Node != deliverer {
		t.Errorf("node 0's retried event: %+v; want gateway status 200, run id %q, no error, node %q", d, want, deliverer)
	}
}

// TestClusterForgedOutcomeChangesNothing (issue 22 follow-up, trust): an
// outcome published on the outcome subject by a plain NATS client (not
// sealed, sealed with a made-up tag, or larger than any outcome), or
// sealed with the cluster's key but out of bounds (a state not on the
// allow-list, a run id with a line break), changes no event and is
// counted in caddy_hooks_cluster_rejected_total{kind="outcome"}; a node's
// sealed outcome then does change it (the subscription works).
func TestClusterForgedOutcomeChangesNothing(t *testing.T) {
	c := startClusterNodes(t, 1, func(_ int, url string) string {
		return clusterLines(url) + "\nspool cluster {\n deliver off\n fallback reject\n}"
	})
	c.waitUp(t)
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"nobody delivers"}`))
	c.waitClusterState(t, 0, id, eventlog.StateQueued)
	before := clusterRejected(t, cluster.RejectedOutcome)

	const subject = "hooks.hooks.outcome"
	forged := fmt.Sprintf(`{"v":1,"node":"evil","ms":1700000000000,"items":[{"id":%q,"state":"delivered","attempts":1,"status":200,"run_id":"forged"}]}`, id)
	kr, err := cluster.NewKeyring([]string{itClusterKey})
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(msg string) []byte { return kr.Seal([]byte(msg), "outcome", subject) }
	badState := strings.Replace(forged, `"state":"delivered"`, `"state":"\u003cscript\u003e"`, 1)
	badRunID := strings.Replace(forged, `"run_id":"forged"`, `"run_id":"a\nb"`, 1)
	msgs := [][]byte{
		[]byte(forged), // not sealed
		append([]byte(forged), make([]byte, cluster.TagSize)...),      // a made-up tag
		sealed(forged + strings.Repeat(" ", cluster.MaxOutcomeBytes)), // too large (sealed even)
		sealed(badState),
		sealed(badRunID),
	}
	nc, _ := natstest.PlainClient(t, c.nats.URL())
	for _, m := range msgs {
		if err := nc.Publish(subject, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitForState(t, func() string {
		return fmt.Sprintf("rejected outcomes: %v more, want %d", clusterRejected(t, cluster.RejectedOutcome)-before, len(msgs))
	}, func() bool { return clusterRejected(t, cluster.RejectedOutcome)-before == float64(len(msgs)) })
	if ev := c.clusterEvent(t, 0, id); ev.State != eventlog.StateQueued || ev.Dispatch[0].RunID != "" || ev.Dispatch[0].Node != "" {
		t.Fatalf("after forged outcomes the event is %+v; want it queued as it was", ev.Dispatch[0])
	}

	// the same outcome, sealed and numbered as a node of this release
	// writes it (the only node runs at cluster level 1), and fresh, applies
	fresh := fmt.Sprintf(`{"v":2,"node":"evil","ms":%d,"from":"0123456789abcdef","n":1,"items":[{"id":%q,"state":"delivered","attempts":1,"status":200,"run_id":"forged"}]}`,
		time.Now().UnixMilli(), id)
	if err := nc.Publish(subject, sealed(fresh)); err != nil {
		t.Fatal(err)
	}
	d := c.waitClusterState(t, 0, id, eventlog.StateDelivered)
	if d.RunID != "forged" || d.Node != "evil" {
		t.Errorf("sealed outcome applied as %+v", d)
	}
	if n := clusterRejected(t, cluster.RejectedOutcome) - before; n != float64(len(msgs)) {
		t.Errorf("rejected outcomes: %v, want %d", n, len(msgs))
	}
}

// outcomeSubs counts the subscriptions on the outcome subject that the
// NATS server holds.
func outcomeSubs(t *testing.T, s *natstest.Server) int {
	t.Helper()
	cz, err := s.Connz(&server.ConnzOptions{Subscriptions: true, Limit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ci := range cz.Conns {
		for _, sub := range ci.Subs {
			if sub == "hooks.hooks.outcome" {
				n++
			}
		}
	}
	return n
}

// TestClusterOutcomeSubscriptionFollowsReload (issue 22 follow-up): a
// handler's subscription to the outcomes lives from its Provision to its
// Cleanup: a reload leaves one per handler (not the old one too, which
// would apply every outcome twice), `events off` none, and a reload back
// one that applies outcomes again.
func TestClusterOutcomeSubscriptionFollowsReload(t *testing.T) {
	hooks := func(extra string) func(int, string) string {
		return func(_ int, url string) string {
			return clusterLines(url) + "\nspool cluster {\n deliver off\n fallback reject\n}\n" + extra
		}
	}
	c := startClusterNodes(t, 2, hooks(""))
	c.waitUp(t)
	want := func(n int) {
		t.Helper()
		testkit.WaitForState(t, func() string { return fmt.Sprintf("%d outcome subscriptions, want %d", outcomeSubs(t, c.nats), n) },
			func() bool { return outcomeSubs(t, c.nats) == n })
	}
	want(2)
	for _, extra := range []string{"events {\n max_events 500\n}", "events {\n max_events 600\n}"} {
		if err := c.reload(t, hooks(extra)); err != nil {
			t.Fatal(err)
		}
		want(2)
	}
	if err := c.reload(t, hooks("events off")); err != nil {
		t.Fatal(err)
	}
	want(0)
	if err := c.reload(t, hooks("")); err != nil {
		t.Fatal(err)
	}
	want(2)
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"dropped elsewhere"}`))
	c.waitClusterState(t, 0, id, eventlog.StateQueued)
	c.handler(t, 1).outcomes.operator([]string{id}, eventlog.StateDropped)
	c.waitClusterState(t, 0, id, eventlog.StateDropped)
}

// TestClusterFallbackEventOutcome (issue 22 follow-up, with the fallback
// spool and the wake lane): an edge's events accepted into its fallback
// spool while NATS is down, a wake and an agent run, are moved into the
// queue when it is back and delivered by the delivery node; the edge's
// event log shows them delivered by it.
func TestClusterFallbackEventOutcome(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	dir := t.TempDir()
	c := startClusterNodes(t, 2, func(i int, url string) string {
		if i == 1 {
			return "gateway unix/" + gw.sock + "\n" + clusterLines(url) + "\nspool cluster {\n fallback reject\n}"
		}
		return clusterLines(url) + "\nspool cluster {\n deliver off\n fallback " + dir + "\n}"
	})
	c.waitUp(t)
	deliverer := c.handler(t, 1).cluster.backend.Node()
	c.nats.Stop()
	h0 := c.handler(t, 0)
	testkit.WaitForState(t, func() string { return "node 0 sees NATS down" }, func() bool { return !h0.cluster.backend.Up() })
	if r := c.nodes[0].post("/hooks/wake", `{"text":"while NATS is down"}`); r.status != http.StatusOK {
		t.Fatalf("wake into the fallback spool: %d %s", r.status, r.body)
	}
	ids := []string{runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"while NATS is down"}`))}
	for _, e := range h0.events.log.List(eventlog.Filter{Hook: "wake", Limit: 1}).Entries {
		if ev, ok := e.(eventlog.EventJSON); ok {
			ids = append(ids, ev.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("node 0's event log has no wake event")
	}
	for _, id := range ids {
		c.waitClusterState(t, 0, id, eventlog.StateQueued)
	}
	c.nats.Restart(t)
	for _, p := range c.proxies {
		p.SetTarget(c.nats.Addr())
	}
	for _, id := range ids {
		if d := c.waitClusterState(t, 0, id, eventlog.StateDelivered); d.GatewayStatus != http.StatusOK || d.Node != deliverer {
			t.Errorf("event %s on node 0: %+v; want delivered by %s with gateway status 200", id, d, deliverer)
		}
	}
}
