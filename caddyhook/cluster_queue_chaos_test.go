//go:build chaos

package caddyhook

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// The fault run (issue 21): three nats-server processes (cmd/natsdev, R3,
// sync_interval always), three caddy edges and a delivery node as caddy
// processes, the devgateway recording what it receives, and a steady load
// of agent events (one in four with an Idempotency-Key). Five faults, each
// in a phase of chaosPhase under load, healed, then drained:
//
//	kill -9 of an edge, kill -9 of the delivery node, kill -9 of the NATS
//	metadata leader, SIGSTOP of the queue stream's leader, two edges cut
//	from NATS by blackholed proxies (no reset: the sockets stay open).
//
// Asserted: every 200 is delivered (0 acknowledged events lost); an event
// delivered more than once carries one Idempotency-Key; every request is
// answered within timeout + 1 s with 200, or 503 or 504 with Retry-After
// (only requests in flight to the edge being killed go unanswered);
// /metrics of every running edge answers within the same bound; an event
// answered 503 is never delivered unless it was keyed (its retry would be
// deduplicated); the queue and the fallback spools drain after each heal.
//
//	go test -tags chaos -count=1 -v -timeout 10m -run TestClusterChaos ./caddyhook/

const (
	chaosTimeout = 2 * time.Second // the edges' cluster timeout
	chaosBound   = chaosTimeout + time.Second
	chaosBefore  = 6 * time.Second  // load before the fault
	chaosFault   = 20 * time.Second // the fault lasts
	chaosAfter   = 12 * time.Second // load after healing
	chaosDrain   = 90 * time.Second // the queue must be empty by then
	chaosSenders = 6
	chaosPause   = 120 * time.Millisecond // between two requests of a sender
)

// chaosRequest is one request of the load and its answer.
type chaosRequest struct {
	name    string
	phase   int
	edge    int
	keyed   bool
	status  int
	retry   string
	elapsed time.Duration
	err     error
}

// chaosRun is the whole setup.
type chaosRun struct {
	t        *testing.T
	nats     [3]*natsProc
	routes   [3]*natstest.Proxy    // route proxy k → server k's cluster port
	clients  [4][3]*natstest.Proxy // node i's proxy to server k's client port
	edges    [3]*clusterProcess
	delivery *clusterProcess
	gw       *testGateway

	live   [3]atomic.Bool // the load balancer sends to edge i
	phase  atomic.Int32
	mu     sync.Mutex
	reqs   []*chaosRequest
	scrape []time.Duration // /metrics latencies, by phase
	scrErr []string
}

// retarget points every proxy to server k at its current addresses.
func (c *chaosRun) retarget(k int) {
	c.routes[k].SetTarget(strings.TrimPrefix(c.nats[k].ready.Route, "nats-route://"))
	for i := range c.clients {
		c.clients[i][k].SetTarget(strings.TrimPrefix(c.nats[k].ready.Client, "nats://"))
	}
}

// clusterBlock is node i's cluster engine: its own proxies to the three
// servers, three replicas.
func (c *chaosRun) clusterBlock(i int) string {
	var urls []string
	for k := range 3 {
		urls = append(urls, c.clients[i][k].URL())
	}
	return fmt.Sprintf(`cluster nats %s {
			replicas 3
			timeout %s
			ack_wait 5s
			signing_key %s
		}`, strings.Join(urls, " "), chaosTimeout, itClusterKey)
}

// natsClient connects the test itself to the servers running now.
func (c *chaosRun) natsClient() (*nats.Conn, jetstream.JetStream) {
	var urls []string
	for _, n := range c.nats {
		if n.proc != nil {
			urls = append(urls, n.ready.Client)
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(2*time.Second))
	if err != nil {
		c.t.Fatalf("test's NATS client: %v", err)
	}
	js, _ := jetstream.New(nc)
	return nc, js
}

// metaLeader is the index of the server leading the JetStream metadata.
func (c *chaosRun) metaLeader() int {
	leader := ""
	testkit.WaitForState(c.t, func() string { return "a metadata leader" }, func() bool {
		for _, n := range c.nats {
			if n.proc == nil {
				continue
			}
			resp, err := http.Get(n.ready.Monitor + "/jsz")
			if err != nil {
				continue
			}
			var jsz struct {
				Meta struct{ Leader string } `json:"meta_cluster"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&jsz)
			resp.Body.Close()
			if leader = jsz.Meta.Leader; leader != "" {
				return true
			}
		}
		return false
	})
	return c.serverIndex(leader)
}

// queueLeader is the index of the server leading the queue stream.
func (c *chaosRun) queueLeader() int {
	nc, js := c.natsClient()
	defer nc.Close()
	leader := ""
	testkit.WaitForState(c.t, func() string { return "a queue stream leader" }, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "HOOKS_hooks_QUEUE")
		if err != nil || st.CachedInfo().Cluster == nil {
			return false
		}
		leader = st.CachedInfo().Cluster.Leader
		return leader != ""
	})
	return c.serverIndex(leader)
}

func (c *chaosRun) serverIndex(name string) int {
	for k, n := range c.nats {
		if n.name == name {
			return k
		}
	}
	c.t.Fatalf("no server named %q", name)
	return -1
}

// send runs one sender until stop closes.
func (c *chaosRun) send(id int, stop <-chan struct{}) {
	client := &http.Client{Timeout: 15 * time.Second}
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		case <-time.After(chaosPause):
		}
		edge := (id + k) % 3
		for range 3 {
			if c.live[edge].Load() {
				break
			}
			edge = (edge + 1) % 3
		}
		phase := int(c.phase.Load())
		r := &chaosRequest{name: fmt.Sprintf("p%d-s%d-%d", phase, id, k), phase: phase, edge: edge, keyed: k%4 == 0}
		req, _ := http.NewRequest(http.MethodPost, c.edges[edge].base+"/hooks/agent",
			strings.NewReader(`{"message":"`+namedMessage(r.name, "chaos load")+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+itHookToken)
		if r.keyed {
			req.Header.Set("Idempotency-Key", "key-"+r.name)
		}
		start := time.Now()
		resp, err := client.Do(req)
		r.elapsed = time.Since(start)
		if err != nil {
			r.err = err
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.status, r.retry = resp.StatusCode, resp.Header.Get("Retry-After")
		}
		c.mu.Lock()
		c.reqs = append(c.reqs, r)
		c.mu.Unlock()
	}
}

// scrapeMetrics reads every live edge's /metrics (Caddy's admin API) every
// half second until stop closes, recording how long each took.
func (c *chaosRun) scrapeMetrics(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		for i, e := range c.edges {
			if !c.live[i].Load() {
				continue
			}
			start := time.Now()
			resp, err := unixClient(e.admin).Get("http://localhost/metrics")
			took := time.Since(start)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			c.mu.Lock()
			if c.live[i].Load() && (err != nil || took > chaosBound) { // (not killed meanwhile)
				c.scrErr = append(c.scrErr, fmt.Sprintf("edge %d /metrics in phase %d: %v after %s", i+1, c.phase.Load(), err, took))
			}
			c.scrape = append(c.scrape, took)
			c.mu.Unlock()
		}
	}
}

// queueDepth reads the cluster queue's depth (fallback spools included)
// from node p's admin API.
func queueDepth(p *clusterProcess) (int, error) {
	resp, err := unixClient(p.admin).Get("http://localhost/hooks/")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st []struct {
		Spool struct{ Depth int } `json:"spool"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st) == 0 {
		return 0, fmt.Errorf("status: %v", err)
	}
	return st[0].Spool.Depth, nil
}

// drain waits until every 200 so far is delivered and the queue and the
// fallback spools are empty.
func (c *chaosRun) drain(what string) time.Duration {
	start := time.Now()
	deadline := start.Add(chaosDrain)
	for {
		c.mu.Lock()
		var accepted []string
		for _, r := range c.reqs {
			if r.status == http.StatusOK {
				accepted = append(accepted, r.name)
			}
		}
		c.mu.Unlock()
		d := delivered(c.gw)
		missing := 0
		for _, name := range accepted {
			if len(d[name]) == 0 {
				missing++
			}
		}
		depth := 0
		for _, p := range append(c.edges[:], c.delivery) {
			n, err := queueDepth(p)
			if err != nil {
				depth = -1
				break
			}
			depth += n
		}
		if missing == 0 && depth == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not drained after %s: %d accepted events not delivered, queue depth %d", what, chaosDrain, missing, depth)
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
}

// chaosFaultDef is one fault: inject, then heal.
type chaosFaultDef struct {
	name         string
	inject, heal func(c *chaosRun)
}

func TestClusterChaos(t *testing.T) {
	bin := testkit.CaddyBinary(t)
	natsBin := buildNatsDev(t)
	// the gateway takes 20 ms per run, so that the delivery node dies
	// with deliveries in flight
	c := &chaosRun{t: t, gw: serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Delay: 20 * time.Millisecond})}
	var routeURLs []string
	for k := range 3 {
		c.routes[k] = natstest.NewProxy(t, "")
		routeURLs = append(routeURLs, "nats-route://"+c.routes[k].Addr())
		for i := range c.clients {
			c.clients[i][k] = natstest.NewProxy(t, "")
		}
	}
	for k := range 3 {
		dir, err := os.MkdirTemp("", "chnats")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		c.nats[k] = &natsProc{t: t, bin: natsBin, name: fmt.Sprintf("n%d", k+1), dir: dir, routes: strings.Join(routeURLs, ",")}
		t.Cleanup(c.nats[k].stop)
		c.nats[k].start()
		c.retarget(k)
	}
	var clientURLs []string
	for _, n := range c.nats {
		clientURLs = append(clientURLs, n.ready.Client)
	}
	natstest.WaitJetStream(t, clientURLs)

	fallbacks := t.TempDir()
	for i := range 3 {
		fb := "reject"
		if i != 1 {
			fb = filepath.Join(fallbacks, fmt.Sprintf("edge%d", i+1))
		}
		c.edges[i] = startClusterProcess(t, bin, fmt.Sprintf("e%d", i+1), c.clusterBlock(i)+`
		spool cluster {
			deliver off
			fallback `+fb+`
		}`)
		c.live[i].Store(true)
	}
	c.delivery = startClusterProcess(t, bin, "d1", "gateway unix/"+c.gw.sock+"\n\t\tgateway_timeout 4s\n\t\t"+c.clusterBlock(3)+`
		spool cluster {
			fallback reject
			retry_initial 100ms
			retry_max 1s
			workers 8
		}`)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(c.edges[:], c.delivery) {
				t.Logf("--- %s\n%s", p.dir, p.tail(p.runs))
			}
		}
	})

	faults := []chaosFaultDef{
		{"kill -9 edge 1", func(c *chaosRun) { c.live[0].Store(false); c.edges[0].kill() },
			func(c *chaosRun) { c.edges[0].start(); c.live[0].Store(true) }},
		{"kill -9 delivery node", func(c *chaosRun) { c.delivery.kill() }, func(c *chaosRun) { c.delivery.start() }},
		{"kill -9 NATS meta leader", nil, nil},
		{"SIGSTOP NATS queue leader", nil, nil},
		{"edges 2+3 cut from NATS", func(c *chaosRun) {
			for _, i := range []int{1, 2} {
				for k := range 3 {
					c.clients[i][k].Blackhole(true)
				}
			}
		}, func(c *chaosRun) {
			for _, i := range []int{1, 2} {
				for k := range 3 {
					c.clients[i][k].Blackhole(false)
				}
			}
		}},
	}
	var victim int
	faults[2].inject = func(c *chaosRun) { victim = c.metaLeader(); c.nats[victim].kill() }
	faults[2].heal = func(c *chaosRun) { c.nats[victim].start(); c.retarget(victim) }
	faults[3].inject = func(c *chaosRun) { victim = c.queueLeader(); _ = c.nats[victim].proc.Signal(syscall.SIGSTOP) }
	faults[3].heal = func(c *chaosRun) { _ = c.nats[victim].proc.Signal(syscall.SIGCONT) }

	drains := make([]time.Duration, len(faults))
	victims := make([]string, len(faults))
	for f, fault := range faults {
		c.phase.Store(int32(f))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for s := range chaosSenders {
			wg.Go(func() { c.send(s, stop) })
		}
		wg.Go(func() { c.scrapeMetrics(stop) })
		time.Sleep(chaosBefore) // load before the fault
		fault.inject(c)
		if f == 2 || f == 3 {
			victims[f] = c.nats[victim].name
		}
		time.Sleep(chaosFault) // the fault lasts
		fault.heal(c)
		time.Sleep(chaosAfter) // load after healing
		close(stop)
		wg.Wait()
		drains[f] = c.drain(fault.name)
	}

	// the table and the assertions
	d := delivered(c.gw)
	type row struct {
		requests, ok, r503, r504, unanswered, delivered, dup, lost int
		maxLat                                                     time.Duration
	}
	rows := make([]row, len(faults))
	for _, r := range c.reqs {
		w := &rows[r.phase]
		w.requests++
		w.maxLat = max(w.maxLat, r.elapsed)
		n := len(d[r.name])
		if n > 0 {
			w.delivered++
		}
		if duplicated(t, r.name, d[r.name]) {
			w.dup++
		}
		switch {
		case r.err != nil:
			w.unanswered++
			if !(r.phase == 0 && r.edge == 0) {
				t.Errorf("%s (phase %d, edge %d): no answer: %v", r.name, r.phase, r.edge+1, r.err)
			}
			continue
		case r.elapsed > chaosBound:
			t.Errorf("%s (%s, edge %d): answered %d after %s, want within %s", r.name, faults[r.phase].name, r.edge+1,
				r.status, r.elapsed.Round(time.Millisecond), chaosBound)
		}
		switch r.status {
		case http.StatusOK:
			w.ok++
			if n == 0 {
				w.lost++
				t.Errorf("%s (%s): answered 200 and never delivered", r.name, faults[r.phase].name)
			}
		case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			if r.status == http.StatusServiceUnavailable {
				w.r503++
				if n > 0 && !r.keyed {
					t.Errorf("%s (%s, edge %d): answered 503 and delivered: a retry without a key runs it twice", r.name, faults[r.phase].name, r.edge+1)
				}
			} else {
				w.r504++
			}
			if r.retry == "" {
				t.Errorf("%s: %d without Retry-After", r.name, r.status)
			}
		default:
			t.Errorf("%s (%s): status %d", r.name, faults[r.phase].name, r.status)
		}
	}
	for _, e := range c.scrErr {
		t.Error(e)
	}
	var maxScrape time.Duration
	for _, s := range c.scrape {
		maxScrape = max(maxScrape, s)
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "fault run: 3 NATS (R3, sync always), 3 edges (1, 3: fallback dir; 2: fallback reject), 1 delivery node; "+
		"per phase %s load, fault %s, %s after healing; timeout %s\n", chaosBefore+chaosFault+chaosAfter, chaosFault, chaosAfter, chaosTimeout)
	fmt.Fprintf(w, "%-32s %8s %6s %6s %6s %6s %9s %9s %6s %5s %7s\n", "fault", "requests", "200", "503", "504", "no-ans", "max-lat", "delivered", "dup", "lost", "drain")
	for f, r := range rows {
		name := faults[f].name
		if victims[f] != "" {
			name += " (" + victims[f] + ")"
		}
		fmt.Fprintf(w, "%-32s %8d %6d %6d %6d %6d %9s %9d %6d %5d %7s\n", name, r.requests, r.ok, r.r503, r.r504, r.unanswered,
			r.maxLat.Round(time.Millisecond), r.delivered, r.dup, r.lost, drains[f].Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "/metrics: %d scrapes of the running edges, slowest %s\n", len(c.scrape), maxScrape.Round(time.Millisecond))
	fmt.Fprintf(w, "(no-ans: requests in flight to edge 1 when it was killed, given up by the client after 15 s, which max-lat then shows;\n"+
		" dup: delivered more than once, each with one Idempotency-Key; drain: after the load stopped, until every 200 was delivered)\n")
	w.Flush()
	t.Log("\n" + b.String())
}
