package caddyhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/promtest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// clusterNodes are n hooks handlers in one in-process Caddy, each in a
// server of its own (127.0.0.<i+1>, port 0 read back) with its own
// lockout table, idempotency cache and NATS connection (through a proxy
// of its own, so each is a distinct cluster node), all in one namespace
// of an in-process NATS JetStream server.
type clusterNodes struct {
	in      *ingress
	nats    *natstest.Server
	proxies []*natstest.Proxy
	nodes   []*ingress // node i: requests go to its server
	servers []string   // node i's Caddy server name
}

// startClusterNodes starts NATS and n nodes; hooks(i, natsURL) returns the
// lines of node i's hooks block besides token and gateway_token (gateway,
// cluster, spool …).
func startClusterNodes(t *testing.T, n int, hooks func(i int, natsURL string) string) *clusterNodes {
	t.Helper()
	return startClusterNodesOn(t, nil, n, hooks)
}

// startClusterNodesOn is startClusterNodes on the servers of a NATS
// cluster (node i connects to server i mod len), or with nc nil on a
// single server of its own.
func startClusterNodesOn(t *testing.T, nc *natstest.Cluster, n int, hooks func(i int, natsURL string) string) *clusterNodes {
	t.Helper()
	for i := 2; i <= n; i++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i))
		if err != nil {
			t.Skipf("this machine's loopback has no 127.0.0.%d: %v", i, err)
		}
		ln.Close()
	}
	c := &clusterNodes{in: startIngress(t, ingressOpts{})}
	target := func(i int) string { return nc.Servers[i%len(nc.Servers)].Addr() }
	if nc == nil {
		c.nats = natstest.Run(t, natstest.Options{})
		target = func(int) string { return c.nats.Addr() }
	}
	for i := range n {
		c.proxies = append(c.proxies, natstest.NewProxy(t, target(i)))
	}
	if err := c.reload(t, hooks); err != nil {
		t.Fatalf("load: %v", err)
	}
	return c
}

// reload loads the nodes' config again with the hooks lines of hooks (a
// `caddy reload`); a refused config leaves the running one, and its
// error is returned.
func (c *clusterNodes) reload(t *testing.T, hooks func(i int, natsURL string) string) error {
	t.Helper()
	var sites []string
	for i, p := range c.proxies {
		sites = append(sites, fmt.Sprintf(`http://127.0.0.%[1]d:0 {
	bind 127.0.0.%[1]d
	hooks {
		token %[2]s
		gateway_token %[3]s
		%[4]s
	}
}
`, i+1, itHookToken, itGatewayToken, hooks(i, p.URL())))
	}
	if err := c.in.tryLoad(c.in.caddyfile(sites...)); err != nil {
		return err
	}
	c.nodes, c.servers = nil, nil
	addrs := listenAddrs(t)
	for i := range c.proxies {
		host := fmt.Sprintf("127.0.0.%d", i+1)
		for name, as := range addrs {
			if len(as) > 0 && strings.HasPrefix(as[0], host+":") {
				node := *c.in
				node.base = "http://" + as[0]
				c.nodes = append(c.nodes, &node)
				c.servers = append(c.servers, name)
			}
		}
	}
	if len(c.nodes) != len(c.proxies) {
		t.Fatalf("listeners %v: want one server per node", addrs)
	}
	return nil
}

// itClusterKey is the signing key of the test clusters.
const itClusterKey = "it-cluster-signing-key-7d6c5b4a39281706f5e4d3c2"

// clusterLines is the cluster block of a node on url.
func clusterLines(url string) string {
	return `cluster nats ` + url + ` {
			timeout 1s
			ack_wait 5s
			signing_key ` + itClusterKey + `
		}`
}

// handler returns node i's running handler.
func (c *clusterNodes) handler(t *testing.T, i int) *Handler {
	t.Helper()
	for _, rh := range runningHooks(t) {
		if rh.server == c.servers[i] {
			return rh.h
		}
	}
	t.Fatalf("no running handler for node %d (server %s)", i, c.servers[i])
	return nil
}

// clusterMetric reads the cluster collector name (a counter or gauge
// without labels) of the running handlers.
func clusterMetric(t *testing.T, name string) float64 {
	t.Helper()
	v, err := gatherClusterMetric(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// gatherClusterMetric reads the series of the cluster collector name
// with labels (name, value pairs; none: its only series) through a
// registry, as a /metrics scrape does.
func gatherClusterMetric(name string, labels ...string) (float64, error) {
	reg, err := clusterMetricsRegistry()
	if err != nil {
		return 0, err
	}
	v, ok := promtest.Value(reg, name, labels...)
	if !ok {
		return 0, fmt.Errorf("no metric %s %v", name, labels)
	}
	return v, nil
}

// clusterMetricsRegistry is a registry holding the process's cluster
// metrics (bound to one node of this process).
func clusterMetricsRegistry() (*prometheus.Registry, error) {
	var m *cluster.Metrics
	sharedPool.Range(func(_, v any) bool {
		if s, ok := v.(*clusterMetricsShare); ok {
			m = s.m
		}
		return true
	})
	if m == nil {
		return nil, errors.New("no cluster metrics in the pool")
	}
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// failuresOf reads what t holds for ip now: the failures counted, and
// whether ip is locked.
func failuresOf(t interface {
	Lookup(netip.Addr, time.Time) (uint32, time.Duration)
}, ip netip.Addr) (uint32, bool) {
	n, left := t.Lookup(ip, time.Now())
	return n, left > 0
}

// waitMembers waits until every node with a cluster engine sees every
// node as a member of its lockout.
func (c *clusterNodes) waitMembers(t *testing.T) {
	t.Helper()
	for i := range c.nodes {
		if h := c.handler(t, i); h.cluster != nil {
			testkit.WaitForState(t, func() string { return fmt.Sprintf("node %d sees %d lockout members", i, len(c.nodes)) }, func() bool {
				return h.cluster.sync.Members() == len(c.nodes)
			})
		}
	}
}

// lockoutOwner returns the node owning ip's failure count.
func (c *clusterNodes) lockoutOwner(t *testing.T, ip netip.Addr) int {
	t.Helper()
	owner := -1
	for i := range c.nodes {
		h := c.handler(t, i)
		if h.cluster.sync.Owns(cluster.Addr(h.lockout.KeyOf(ip))) {
			if owner >= 0 {
				t.Fatalf("nodes %d and %d both own %s", owner, i, ip)
			}
			owner = i
		}
	}
	if owner < 0 {
		t.Fatalf("no node owns %s", ip)
	}
	return owner
}

// settled reports whether no node has a failure unconfirmed by its owner.
func (c *clusterNodes) settled(t *testing.T) bool {
	for i := range c.nodes {
		if h := c.handler(t, i); h.cluster != nil && h.cluster.sync.Pending() != 0 {
			return false
		}
	}
	return true
}

// TestClusterLockoutAcrossNodes (issue 14, lockout; issue 24 item 2):
// wrong-token guesses sent round-robin to three nodes are counted by the
// node owning the address's count, so the address is locked on all of
// them after exactly the limit (20) guesses cluster-wide, not 3 × 20.
// Each guess waits until the owner has it (server-side counts), so the
// count is exact whatever the machine's speed; the bound under a flood is
// measured by cluster.TestLockoutBoundHoldsAtAnyPace and
// TestClusterLockoutBoundAtAnyPace. Only the failures seen by the two
// other nodes travel (once each, to the owner).
func TestClusterLockoutAcrossNodes(t *testing.T) {
	c := startClusterNodes(t, 3, func(i int, url string) string {
		return "gateway unix/" + c0sock(t) + "\n" + clusterLines(url)
	})
	c.waitUp(t)
	c.waitMembers(t)
	const limit = 20
	client := netip.MustParseAddr("127.0.0.1")
	owner := c.lockoutOwner(t, client)
	own := c.handler(t, owner).lockout
	bad := "Authorization: Bearer " + strings.Repeat("g", 40)
	evaluated, remote := 0, 0
	for g := 0; g < 3*limit; g++ {
		node := c.nodes[g%3]
		r := node.do(http.MethodPost, "/hooks/wake", `{"text":"guess"}`, bad)
		if r.status == http.StatusTooManyRequests {
			break
		}
		if r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d on node %d: %d %s", g, g%3, r.status, r.body)
		}
		evaluated++
		if g%3 != owner {
			remote++
		}
		testkit.WaitForState(t, func() string { return fmt.Sprintf("the owner (node %d) counts %d failures", owner, evaluated) }, func() bool {
			n, locked := failuresOf(own, client)
			if !c.settled(t) || (!locked && int(n) < evaluated) {
				return false
			}
			for i := range c.nodes {
				if _, l := failuresOf(c.handler(t, i).lockout, client); locked && !l {
					return false // the owner locked: wait for the lock on every node
				}
			}
			return true
		})
	}
	if evaluated != limit {
		t.Fatalf("%d guesses evaluated cluster-wide before the lock, want exactly %d (3 nodes alone would allow %d)", evaluated, limit, 3*limit)
	}
	for i, node := range c.nodes {
		if r := node.post("/hooks/wake", `{"text":"right token, locked address"}`); r.status != http.StatusTooManyRequests {
			t.Errorf("node %d after the lock: %d %s, want 429", i, r.status, r.body)
		}
	}
	// each failure seen by another node than the owner reached the owner
	// once; none reached the third node
	if n := clusterMetric(t, "caddy_hooks_cluster_remote_failures_total"); n != float64(remote) {
		t.Errorf("caddy_hooks_cluster_remote_failures_total = %v, want %d (the guesses of the two nodes that do not own the address)", n, remote)
	}
	if up := clusterMetric(t, "caddy_hooks_cluster_up"); up != 1 {
		t.Errorf("caddy_hooks_cluster_up = %v, want 1", up)
	}
}

// TestClusterLockoutBoundAtAnyPace (issue 24 item 2): one address
// guessing on three nodes at once, each as fast as its connection
// allows, gets at most limit + 2 × (nodes − 1) guesses evaluated (401)
// before every node answers 429 and lists it as locked. Before, the
// bound was limit + nodes × rate × propagation delay: hookbench
// -cluster-scale measured 26 on two nodes and 58 on sixteen (limit 20).
func TestClusterLockoutBoundAtAnyPace(t *testing.T) {
	const nodes, limit = 3, 20
	c := startClusterNodes(t, nodes, func(i int, url string) string {
		return "gateway unix/" + c0sock(t) + "\n" + clusterLines(url)
	})
	c.waitUp(t)
	c.waitMembers(t)
	client := netip.MustParseAddr("127.0.0.1")
	bad := "Authorization: Bearer " + strings.Repeat("g", 40)
	var evaluated atomic.Int64
	var wg sync.WaitGroup
	for i, node := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r := node.do(http.MethodPost, "/hooks/wake", `{"text":"guess"}`, bad)
				switch r.status {
				case http.StatusUnauthorized:
					evaluated.Add(1)
					continue
				case http.StatusTooManyRequests:
					if _, locked := failuresOf(c.handler(t, i).lockout, client); locked {
						return
					}
					continue // held back until the owner confirms
				}
				t.Errorf("node %d: %d %s", i, r.status, r.body)
				return
			}
		}()
	}
	wg.Wait()
	if n := evaluated.Load(); n < limit || n > limit+2*(nodes-1) {
		t.Errorf("%d guesses evaluated before every node was locked, want between %d and limit + 2 × (nodes − 1) = %d", n, limit, limit+2*(nodes-1))
	}
}

// c0sock is a gateway socket path nothing listens on (lockout tests need
// no gateway).
func c0sock(t *testing.T) string { return "/nonexistent/" + t.Name() + ".sock" }

// TestClusterIdempotencyAcrossNodes (issue 14, idempotency): a keyed
// request replayed on other nodes gets the first reply (same runId) and
// reaches the gateway once; the same key sent concurrently to three
// nodes is dispatched once and every copy gets that reply.
func TestClusterIdempotencyAcrossNodes(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Delay: 50 * time.Millisecond})
	c := startClusterNodes(t, 3, func(i int, url string) string {
		return "gateway unix/" + gw.sock + "\n" + clusterLines(url)
	})
	dispatched := func(text string) int {
		n := 0
		for _, rec := range gw.Received() {
			if rec.Body["text"] == text {
				n++
			}
		}
		return n
	}

	first := c.nodes[0].post("/hooks/wake", `{"text":"sequential"}`, "Idempotency-Key: seq-1")
	if first.status != http.StatusOK {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	for i := 1; i < 3; i++ {
		r := c.nodes[i].post("/hooks/wake", `{"text":"sequential"}`, "Idempotency-Key: seq-1")
		if r.status != http.StatusOK || r.body != first.body {
			t.Fatalf("replay on node %d: %d %s, want the first reply %s", i, r.status, r.body, first.body)
		}
	}
	if n := dispatched("sequential"); n != 1 {
		t.Fatalf("sequential replays: gateway got %d dispatches, want 1", n)
	}

	const copies = 12
	replies := make([]result, copies)
	var wg sync.WaitGroup
	for k := range copies {
		wg.Go(func() {
			replies[k] = c.nodes[k%3].post("/hooks/wake", `{"text":"concurrent"}`, "Idempotency-Key: conc-1")
		})
	}
	wg.Wait()
	for k, r := range replies {
		if r.status != http.StatusOK || r.body != replies[0].body {
			t.Errorf("copy %d (node %d): %d %s, want 200 %s", k, k%3, r.status, r.body, replies[0].body)
		}
	}
	if n := dispatched("concurrent"); n != 1 {
		t.Fatalf("%d concurrent copies on 3 nodes: gateway got %d dispatches, want 1", copies, n)
	}
}

// runIDOf is the runId of an accepted agent request (its event id).
func runIDOf(t *testing.T, r result) string {
	t.Helper()
	id, _ := r.json(t)["runId"].(string)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("want a 200 with a runId: %d %s", r.status, r.body)
	}
	return id
}

// gatewayTally counts what a gateway received by Idempotency-Key.
func gatewayTally(gw *testGateway) (keys map[string]int, doubled int) {
	keys = map[string]int{}
	for _, rec := range gw.Received() {
		if rec.Status == http.StatusOK {
			if keys[rec.IdempotencyKey]++; keys[rec.IdempotencyKey] == 2 {
				doubled++
			}
		}
	}
	return keys, doubled
}

// waitAllDelivered waits until gw has received every accepted event id
// (as its Idempotency-Key) and returns what it received.
func waitAllDelivered(t *testing.T, gw *testGateway, accepted map[string]bool) (keys map[string]int, doubled int) {
	t.Helper()
	testkit.WaitForState(t, func() string {
		keys, _ := gatewayTally(gw)
		return fmt.Sprintf("gateway has %d of %d accepted events", len(keys), len(accepted))
	}, func() bool {
		keys, _ := gatewayTally(gw)
		for id := range accepted {
			if keys[id] == 0 {
				return false
			}
		}
		return true
	})
	return gatewayTally(gw)
}

// adminCall runs one request through the hooks admin API (the routes the
// CLI uses) against the running config.
func adminCall(t *testing.T, method, target, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if err := (&adminAPI{}).serve(rec, req); err != nil {
		var ae caddy.APIError
		if errors.As(err, &ae) {
			return ae.HTTPStatus, ae.Err.Error()
		}
		t.Fatalf("%s %s: %v", method, target, err)
	}
	return rec.Code, rec.Body.String()
}

// TestClusterQueueDeliveryNodeAndFallback (issue 14, queue, fallback and
// operations): two edges without a gateway (deliver off) accept into the
// replicated queue and the third node, the only one next to the gateway,
// delivers every event once. With NATS stopped, the edge with
// `fallback <dir>` keeps answering 200 from its local spool and the one
// with `fallback reject` answers 503 + Retry-After; when NATS is back the
// fallback drains into the queue: nothing lost, nothing doubled. Dead
// letters of the cluster queue are listed, retried and dropped through the
// admin API while Caddy runs.
func TestClusterQueueDeliveryNodeAndFallback(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	fallbackDir := t.TempDir()
	c := startClusterNodes(t, 3, func(i int, url string) string {
		spool := ""
		switch i {
		case 0:
			spool = "deliver off\n fallback " + fallbackDir
		case 1:
			spool = "deliver off\n fallback reject"
		case 2:
			spool = "fallback reject\n retry_initial 50ms\n retry_max 200ms"
			return "gateway unix/" + gw.sock + "\n" + clusterLines(url) + "\nspool cluster {\n" + spool + "\n}"
		}
		return clusterLines(url) + "\nspool cluster {\n" + spool + "\n}"
	})
	accepted := map[string]bool{}
	post := func(node int, n int, what string) {
		t.Helper()
		for k := range n {
			r := c.nodes[node].post("/hooks/agent", fmt.Sprintf(`{"message":"%s %d"}`, what, k))
			accepted[runIDOf(t, r)] = true
		}
	}
	allDelivered := func() {
		t.Helper()
		keys, doubled := waitAllDelivered(t, gw, accepted)
		if doubled != 0 || len(keys) != len(accepted) {
			t.Fatalf("gateway: %d distinct events (%d doubled), %d accepted", len(keys), doubled, len(accepted))
		}
	}

	post(0, 15, "edge zero")
	post(1, 15, "edge one")
	allDelivered()

	// NATS down: fallback dir accepts, reject refuses
	c.nats.Stop()
	for _, i := range []int{0, 1} {
		h := c.handler(t, i)
		testkit.WaitForState(t, func() string { return fmt.Sprintf("node %d sees NATS down", i) }, func() bool { return !h.cluster.backend.Up() })
	}
	post(0, 10, "while NATS is down")
	r := c.nodes[1].post("/hooks/agent", `{"message":"refused"}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("fallback reject with NATS down: %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
	if n := clusterMetric(t, "caddy_hooks_cluster_fallbacks_total"); n != 10 {
		t.Errorf("caddy_hooks_cluster_fallbacks_total = %v, want 10", n)
	}
	// the admin status still answers: the queue's counters are missing (with
	// the reason), the node's own state is there
	sel0 := "?path=/hooks&server=" + c.servers[0]
	if code, body := adminCall(t, http.MethodGet, "/hooks/"+sel0, ""); code != http.StatusOK ||
		!strings.Contains(body, `"up":false`) || !strings.Contains(body, `"error":`) || !strings.Contains(body, `"dir":"cluster:hooks"`) {
		t.Fatalf("status with NATS down: %d %s, want 200 with the cluster down and the spool's error", code, body)
	}
	c.nats.Restart(t)
	for _, p := range c.proxies {
		p.SetTarget(c.nats.Addr())
	}
	allDelivered()

	// dead letters through the admin API
	gw.FailWith(func(string) int { return http.StatusBadRequest })
	dead := map[string]bool{}
	for k := range 2 {
		r := c.nodes[0].post("/hooks/agent", fmt.Sprintf(`{"message":"refused by the gateway %d"}`, k))
		dead[runIDOf(t, r)] = true
	}
	sel := "?path=/hooks&server=" + c.servers[0]
	testkit.WaitForState(t, func() string { return "two dead letters listed" }, func() bool {
		code, body := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, "")
		return code == http.StatusOK && strings.Count(body, `"id"`) == 2
	})
	_, body := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, "")
	for id := range dead {
		if !strings.Contains(body, id) {
			t.Fatalf("dead letters %s: %s missing", body, id)
		}
	}
	gw.FailWith(nil)
	var retryID, dropID string
	for id := range dead {
		if retryID == "" {
			retryID = id
		} else {
			dropID = id
		}
	}
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/dead/retry"+sel, `{"ids":["`+retryID+`"]}`); code != http.StatusOK || !strings.Contains(body, `"retried":1`) {
		t.Fatalf("retry: %d %s", code, body)
	}
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/dead/drop"+sel, `{"ids":["`+dropID+`"]}`); code != http.StatusOK || !strings.Contains(body, `"dropped":1`) {
		t.Fatalf("drop: %d %s", code, body)
	}
	accepted[retryID] = true
	allDelivered()
	if code, body := adminCall(t, http.MethodGet, "/hooks/"+sel, ""); code != http.StatusOK || !strings.Contains(body, `"dead_letters":0`) || !strings.Contains(body, `"dir":"cluster:hooks"`) {
		t.Fatalf("status: %d %s", code, body)
	}
}

// TestClusterLosesOneNATSServer (issue 14, losing one NATS node of three):
// three edges, each connected to another server of a three-server
// JetStream cluster, accept into the queue with `replicas 3` while one
// server is stopped halfway; the delivery node (on the first edge) gets
// every accepted event to the gateway. Each event is sent until it gets a
// 200 (a 503 while the cluster elects new leaders is the documented
// answer to retry on). With the server gone the cluster stays up and says
// that it is degraded (GET /hooks/, the redundancy metrics): the queue on
// two of its three replicas (issue 34 item 4).
func TestClusterLosesOneNATSServer(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-server JetStream cluster; skipped with -short")
	}
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	nc := natstest.RunCluster(t, 3)
	cl := func(url string) string {
		return `cluster nats ` + url + ` {
			replicas 3
			timeout 2s
			ack_wait 5s
			signing_key ` + itClusterKey + `
		}`
	}
	c := startClusterNodesOn(t, nc, 3, func(i int, url string) string {
		if i == 0 {
			return "gateway unix/" + gw.sock + "\n" + cl(url) + "\nspool cluster {\n fallback reject\n retry_initial 50ms\n retry_max 200ms\n}"
		}
		return cl(url) + "\nspool cluster {\n deliver off\n fallback reject\n}"
	})
	accepted := map[string]bool{}
	retried := 0
	send := func(k int) {
		t.Helper()
		node := c.nodes[1+k%2] // the edges on servers 2 and 3
		body := fmt.Sprintf(`{"message":"R3 event %d"}`, k)
		testkit.WaitForState(t, func() string { return fmt.Sprintf("event %d accepted", k) }, func() bool {
			r := node.post("/hooks/agent", body)
			if r.status == http.StatusServiceUnavailable {
				retried++
				return false
			}
			accepted[runIDOf(t, r)] = true
			return true
		})
	}
	for k := range 40 {
		send(k)
	}
	// redundancy (issue 34 item 4): full, then one replica short while
	// the cluster stays up
	sel := "?path=/hooks&server=" + c.servers[1]
	status := func() string { _, body := adminCall(t, http.MethodGet, "/hooks/"+sel, ""); return body }
	queue := `"name":"HOOKS_hooks_QUEUE","replicas":3,"current":`
	testkit.WaitForState(t, func() string { return "every replica current in GET /hooks/: " + status() }, func() bool {
		b := status()
		return strings.Contains(b, `"degraded":false`) && strings.Contains(b, queue+"3")
	})
	nc.Servers[2].Stop()
	for k := 40; k < 80; k++ {
		send(k)
	}
	testkit.WaitForState(t, func() string { return "degraded in GET /hooks/: " + status() }, func() bool {
		b := status()
		return strings.Contains(b, `"up":true`) && strings.Contains(b, `"degraded":true`) && strings.Contains(b, queue+"2")
	})
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{ // (as read by the node the metrics are bound to, every 2 s)
		{"caddy_hooks_cluster_up", nil, 1},
		{"caddy_hooks_cluster_degraded", nil, 1},
		{"caddy_hooks_cluster_replicas", []string{"stream", "HOOKS_hooks_QUEUE"}, 3},
		{"caddy_hooks_cluster_replicas_current", []string{"stream", "HOOKS_hooks_QUEUE"}, 2},
	} {
		var v float64
		var err error
		testkit.WaitForState(t, func() string { return fmt.Sprintf("%s%v = %v (%v), want %v", m.name, m.labels, v, err, m.want) }, func() bool {
			v, err = gatherClusterMetric(m.name, m.labels...)
			return err == nil && v == m.want
		})
	}
	keys, doubled := waitAllDelivered(t, gw, accepted)
	t.Logf("80 events accepted, 40 of them after one NATS server of three stopped (%d answers 503 and sent again); %d delivered, %d twice", retried, len(keys), doubled)
	// nothing lost and nothing else delivered; an event whose ack was
	// lost with the server is delivered again, with the same
	// Idempotency-Key (at least once, as the README says)
	if len(keys) != len(accepted) {
		t.Fatalf("gateway: %d distinct events (%d doubled), %d accepted", len(keys), doubled, len(accepted))
	}
}

// TestClusterPauseHoldsPastMaxAge (issue 21 item 3, the cluster queue):
// a delivery node's pause holds its deliveries without spending their
// max_age, as a local spool's does: max_age 1s, paused for 1.5 s, resumed,
// and the event is delivered, not dead-lettered "expired".
func TestClusterPauseHoldsPastMaxAge(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	c := startClusterNodes(t, 1, func(_ int, url string) string {
		return "gateway unix/" + gw.sock + "\n" + clusterLines(url) + "\nspool cluster {\n fallback reject\n max_age 1s\n}"
	})
	sel := "?path=/hooks&server=" + c.servers[0]
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/pause"+sel, ""); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"held for maintenance"}`))
	accepted := time.Now()
	testkit.WaitForState(t, func() string { return "1.5 s to pass" }, func() bool { return time.Since(accepted) > 1500*time.Millisecond })
	if code, body := adminCall(t, http.MethodPost, "/hooks/spool/resume"+sel, ""); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	testkit.WaitForState(t, func() string {
		_, dead := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, "")
		return "the held event was not delivered; dead letters: " + dead
	}, func() bool { return gw.Count("agent") == 1 })
	keys, _ := waitAllDelivered(t, gw, map[string]bool{id: true})
	if len(keys) != 1 {
		t.Fatalf("delivered %d events, want the held one", len(keys))
	}
	if code, body := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, ""); code != http.StatusOK || strings.Contains(body, `"id"`) {
		t.Fatalf("dead letters after the resume: %d %s", code, body)
	}
}

// TestClusterBodyOverMaxPayload (D29 of issue 35): a body the handler's
// limits admit but that does not fit in one NATS message (max_payload,
// 1 MiB by default) is refused with 413 and a reason naming max_payload,
// never the 503 "cluster unavailable" a retry could never get past (and
// not put into a fallback spool, whose drain could never move it); a
// body that fits is accepted and delivered.
func TestClusterBodyOverMaxPayload(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	for _, fallback := range []string{"reject", t.TempDir()} {
		c := startClusterNodes(t, 1, func(_ int, url string) string {
			return "gateway unix/" + gw.sock + "\nmax_body 4MiB\n" + clusterLines(url) + "\nspool cluster {\n fallback " + fallback + "\n}"
		})
		big := c.nodes[0].post("/hooks/wake", `{"text":"`+strings.Repeat("a", 1536<<10)+`"}`)
		if big.status != http.StatusRequestEntityTooLarge || big.json(t)["error"] != reasonClusterTooLarge {
			t.Fatalf("fallback %s: 1.5 MiB body: %d %s, want 413 %q", fallback, big.status, big.body, reasonClusterTooLarge)
		}
		small := c.nodes[0].post("/hooks/wake", `{"text":"`+strings.Repeat("b", 512<<10)+`"}`)
		if small.status != http.StatusOK {
			t.Fatalf("fallback %s: 512 KiB body: %d %s", fallback, small.status, small.body)
		}
	}
}

// TestClusterPayloadWarning: provisioning warns, naming both numbers,
// when the largest body limit does not fit in the servers' max_payload.
func TestClusterPayloadWarning(t *testing.T) {
	for _, tc := range []struct {
		limit, maxPayload int64
		warn              bool
	}{
		{256 << 10, 1 << 20, false},
		{1 << 20, 1 << 20, true},
		{6_800_000, 1 << 20, true},
		{6_800_000, 8 << 20, false},
		{6_800_000, 0, false}, // not connected yet
	} {
		msg := payloadWarning(tc.limit, tc.maxPayload)
		if (msg != "") != tc.warn || tc.warn && (!strings.Contains(msg, strconv.FormatInt(tc.limit, 10)) ||
			!strings.Contains(msg, "max_payload "+strconv.FormatInt(tc.maxPayload, 10))) {
			t.Errorf("limit %d, max_payload %d: %q", tc.limit, tc.maxPayload, msg)
		}
	}
}

// TestSpooledIdenticalAnswersDeadLetter (issue 35 item 9): through a
// local spool (render and forward mode) and through the cluster queue, an
// event the gateway answers with the same 500 every time (a transform that
// always throws) is not retried until max_age: after max_identical_errors
// answers it is a dead letter carrying the gateway's error, and the event
// log says so.
func TestSpooledIdenticalAnswersDeadLetter(t *testing.T) {
	const spoolOpts = "\n retry_initial 20ms\n retry_max 50ms\n max_identical_errors 3\n"
	check := func(t *testing.T, sel string, count func() int, post func() result) {
		t.Helper()
		if r := post(); r.status != http.StatusOK {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
		want := `gateway status 500: {\"error\":\"forced status 500\",\"ok\":false} (the same answer 3 times in a row`
		testkit.WaitForState(t, func() string {
			_, dead := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, "")
			return "no dead letter with the gateway's repeated error: " + dead
		}, func() bool {
			_, dead := adminCall(t, http.MethodGet, "/hooks/spool/dead"+sel, "")
			return strings.Contains(dead, want)
		})
		if n := count(); n != 3 {
			t.Errorf("the gateway got %d attempts, want 3", n)
		}
		testkit.WaitForState(t, func() string {
			_, ev := adminCall(t, http.MethodGet, "/hooks/events"+sel, "")
			return "the event log does not say dead: " + ev
		}, func() bool {
			_, ev := adminCall(t, http.MethodGet, "/hooks/events"+sel, "")
			return strings.Contains(ev, `"state":"dead"`) && strings.Contains(ev, "the same answer 3 times in a row")
		})
	}
	failing := func(g *devgw.Gateway) func() int {
		var n atomic.Int64
		g.FailWith(func(string) int { n.Add(1); return http.StatusInternalServerError })
		return func() int { return int(n.Load()) }
	}
	for _, mode := range []string{"render", "forward"} {
		t.Run("spool "+mode, func(t *testing.T) {
			in := startIngress(t, ingressOpts{hooks: "mode " + mode + "\nspool " + t.TempDir() + " {" + spoolOpts + "}"})
			check(t, "?path=/hooks", failing(in.gw), func() result { return in.post("/hooks/agent", `{"message":"throws every time"}`) })
		})
	}
	t.Run("cluster", func(t *testing.T) {
		gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
		count := failing(gw.Gateway)
		c := startClusterNodes(t, 1, func(_ int, url string) string {
			return "gateway unix/" + gw.sock + "\n" + clusterLines(url) + "\nspool cluster {\n fallback reject" + spoolOpts + "}"
		})
		check(t, "?path=/hooks&server="+c.servers[0], count, func() result { return c.nodes[0].post("/hooks/agent", `{"message":"throws every time"}`) })
	})
}
