package caddyhook

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster/natstest"
	"github.com/caddyhook/caddyhook/internal/devgw"
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
	for i := 2; i <= n; i++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i))
		if err != nil {
			t.Skipf("this machine's loopback has no 127.0.0.%d: %v", i, err)
		}
		ln.Close()
	}
	c := &clusterNodes{in: startIngress(t, ingressOpts{}), nats: natstest.Run(t, natstest.Options{})}
	var sites []string
	for i := range n {
		p := natstest.NewProxy(t, c.nats.Addr())
		c.proxies = append(c.proxies, p)
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
	c.in.load(c.in.caddyfile(sites...))
	addrs := listenAddrs(t)
	for i := range n {
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
	if len(c.nodes) != n {
		t.Fatalf("listeners %v: want one server per node", addrs)
	}
	return c
}

// clusterLines is the cluster block of a node on url.
func clusterLines(url string) string {
	return `cluster nats ` + url + ` {
			timeout 1s
			ack_wait 5s
		}`
}

// handler returns node i's running handler.
func (c *clusterNodes) handler(t *testing.T, i int) *Handler {
	t.Helper()
	for _, lh := range liveHandlers() {
		if lh.server == c.servers[i] {
			return lh.h
		}
	}
	t.Fatalf("no running handler for node %d (server %s)", i, c.servers[i])
	return nil
}

// failuresOf reads what t holds for ip now: the failures counted, and
// whether ip is locked.
func failuresOf(t *lockoutTable, ip netip.Addr) (uint32, bool) {
	now := time.Now().UnixMilli()
	k := t.keyFor(ip)
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, now)
	if e == nil {
		return 0, false
	}
	return t.failures(e, now), e.until != 0 && now < t.lockEnd(e)
}

// TestClusterLockoutAcrossNodes (issue 14, lockout): wrong-token guesses
// sent round-robin to three nodes are counted by every node, so the
// address is locked on all of them after exactly the limit (20) guesses
// cluster-wide, not 3 × 20. Each guess waits until every node has folded
// it in (server-side counts), so the count is exact whatever the
// machine's speed; the bound under a flood is measured by
// cluster.TestLockoutFloodIsBoundedAcrossNodes.
func TestClusterLockoutAcrossNodes(t *testing.T) {
	c := startClusterNodes(t, 3, func(i int, url string) string {
		return "gateway unix/" + c0sock(t) + "\n" + clusterLines(url)
	})
	const limit = 20
	client := netip.MustParseAddr("127.0.0.1")
	bad := "Authorization: Bearer " + strings.Repeat("g", 40)
	evaluated := 0
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
		waitFor(t, func() string { return fmt.Sprintf("every node counts %d failures", evaluated) }, func() bool {
			for i := range c.nodes {
				n, locked := failuresOf(c.handler(t, i).lockout, client)
				if !locked && int(n) < evaluated {
					return false
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
