//go:build chaos

package caddyhook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/loopstore"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// The fault run (issues 21 and 34): three nats-server processes
// (cmd/natsdev, R3, sync_interval always, each store on a loop-mounted
// filesystem of its own), three caddy edges and a delivery node as caddy
// processes, the devgateway recording what it receives, and a steady load
// of agent events (one in four with an Idempotency-Key, sent as a pair: the
// same request to two edges at once). Eight faults, each in a phase under
// load, healed, then drained:
//
//	kill -9 of an edge, kill -9 of the delivery node, kill -9 of the NATS
//	metadata leader, SIGSTOP of the queue stream's leader, two edges cut
//	from NATS by blackholed proxies (no reset: the sockets stay open), and
//	three stalled stores (fsfreeze -f for 30 s: the server answers PINGs,
//	its writes block): the server edge 2 is connected to, the idempotency
//	bucket's leader, the queue stream's leader.
//
// Asserted: every 200 is delivered (0 acknowledged events lost); an event
// delivered more than once carries one Idempotency-Key; every request is
// answered within timeout + 1 s with 200, or 503 or 504 with Retry-After,
// or (a copy of a keyed pair) 409 with Retry-After (only requests in
// flight to the edge being killed go unanswered); /metrics of every
// running edge answers within the same bound; an event answered 503 is
// never delivered unless it was keyed (its retry would be deduplicated);
// the queue and the fallback spools drain after each heal; during a
// stall of the server edge 2 is connected to (its leaders moved to the
// other servers first: a stalled leader is the other two faults), every
// node is back (caddy_hooks_cluster_up 1) and the gateway gets deliveries
// again within chaosBackWithin of the stall's start, and no node is down
// longer than chaosLongestOutage in a row. When the stalled server leads
// a stream, the node is down until NATS elects another leader (the table
// shows for how long), which is NATS's to decide: not asserted.
//
// It needs root (loop devices, fsfreeze) and fails, saying so, without.
//
//	go test -tags chaos -count=1 -v -timeout 15m -run TestClusterChaos ./caddyhook/

const (
	chaosTimeout = 2 * time.Second // the edges' cluster timeout
	chaosBound   = chaosTimeout + time.Second
	chaosBefore  = 6 * time.Second  // load before the fault
	chaosFault   = 20 * time.Second // the fault lasts
	chaosAfter   = 12 * time.Second // load after healing
	chaosDrain   = 90 * time.Second // the queue must be empty by then
	chaosSenders = 6
	chaosPause   = 120 * time.Millisecond // between two requests of a sender

	// a stalled store: shorter load around a longer fault
	chaosStallBefore = 4 * time.Second
	chaosStall       = 30 * time.Second
	chaosStallAfter  = 8 * time.Second
	chaosBackWithin  = 10 * time.Second // every node up again after the start of a stall of its server
	// no node down longer in a row when the server it uses stalls ("a
	// few seconds": it notices and moves to another server)
	chaosLongestOutage = 5 * time.Second
	chaosStoreSize     = 512 << 20
	chaosSample        = 500 * time.Millisecond // cluster_up and /metrics sampling
)

// chaosRequest is one request of the load and its answer.
type chaosRequest struct {
	name    string
	phase   int
	edge    int
	keyed   bool
	copy    bool // the second of a keyed pair (same key, another edge, same moment)
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

	live     [3]atomic.Bool // the load balancer sends to edge i
	dlive    atomic.Bool    // the delivery node runs
	phase    atomic.Int32
	mu       sync.Mutex
	reqs     []*chaosRequest
	scrape   []time.Duration // /metrics latencies, by phase
	scrErr   []string
	upSample []upSample // every node's caddy_hooks_cluster_up, every chaosSample
}

// upSample is one reading of a node's caddy_hooks_cluster_up (node 0-2:
// the edges, 3: the delivery node).
type upSample struct {
	phase, node int
	at          time.Time
	up          bool
}

// retarget points every proxy to server k at its current addresses.
func (c *chaosRun) retarget(k int) {
	c.routes[k].SetTarget(strings.TrimPrefix(c.nats[k].ready.Route, "nats-route://"))
	for i := range c.clients {
		c.clients[i][k].SetTarget(strings.TrimPrefix(c.nats[k].ready.Client, "nats://"))
	}
}

// untarget makes every proxy to server k refuse connections, while k
// is down: its ports are free then, and whatever process the kernel
// gives one of them to next must not get server k's connections.
func (c *chaosRun) untarget(k int) {
	c.routes[k].SetTarget("")
	for i := range c.clients {
		c.clients[i][k].SetTarget("")
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

// jsz is what the tests read of a server's /jsz monitoring page.
type jsz struct {
	Meta     struct{ Leader string } `json:"meta_cluster"`
	Accounts []struct {
		Streams []struct {
			Name      string
			Cluster   struct{ Leader string }
			Consumers []struct {
				Name    string
				Cluster struct{ Leader string }
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// chaosStreams are the streams of the namespace "hooks"; its delivery
// consumers are on the queue.
var chaosStreams = []string{"HOOKS_hooks_QUEUE", "HOOKS_hooks_DEAD", "KV_hooks_hooks_idem", "KV_hooks_hooks_locks", "KV_hooks_hooks_lanes"}

// moveLeaders asks the leaders of the namespace's streams and delivery
// consumers that are on server k to step down, until every server names
// the same leader, not k, for each of them: what stalls there then is a
// server that leads nothing the nodes need, only serves their
// connections and holds replicas. One server's word is not enough: while
// an election is under way a server names no leader, and a follower may
// name the one before for a while (a step down sent on that word reaches
// the new leader, which may hand the lead back to k).
func (c *chaosRun) moveLeaders(k int) {
	other := c.nats[(k+1)%3]
	nc, err := nats.Connect(other.ready.Client, nats.Timeout(2*time.Second))
	if err != nil {
		c.t.Fatalf("test's NATS client: %v", err)
	}
	defer nc.Close()
	client := &http.Client{Timeout: 2 * time.Second}
	state := ""
	testkit.WaitForState(c.t, func() string {
		return "every server names one leader, not " + c.nats[k].name + " (last: " + state + ")"
	}, func() bool {
		named := map[string][]string{}  // stream or "stream > consumer" → the leader each server names
		stepdown := map[string]string{} // → its step-down subject
		for _, n := range c.nats {
			resp, err := client.Get(n.ready.Monitor + "/jsz?accounts=true&streams=true&consumers=true")
			if err != nil {
				state = n.name + ": " + err.Error()
				return false
			}
			var j jsz
			err = json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if err != nil {
				state = n.name + ": " + err.Error()
				return false
			}
			for _, a := range j.Accounts {
				for _, st := range a.Streams {
					if !slices.Contains(chaosStreams, st.Name) {
						continue
					}
					named[st.Name] = append(named[st.Name], st.Cluster.Leader)
					stepdown[st.Name] = "$JS.API.STREAM.LEADER.STEPDOWN." + st.Name
					for _, co := range st.Consumers {
						if co.Name == "wake" || co.Name == "agent" {
							what := st.Name + " > " + co.Name
							named[what] = append(named[what], co.Cluster.Leader)
							stepdown[what] = "$JS.API.CONSUMER.LEADER.STEPDOWN." + st.Name + "." + co.Name
						}
					}
				}
			}
		}
		state = ""
		for what, leaders := range named {
			// (every server holds a replica of each: R3 on three; a
			// majority of them naming it is enough to go on)
			agreed := len(leaders) >= 2 && leaders[0] != "" && !slices.ContainsFunc(leaders, func(l string) bool { return l != leaders[0] })
			switch {
			case !agreed:
				state += fmt.Sprintf("%s: %q; ", what, leaders) // an election, or its news, under way
			case leaders[0] == c.nats[k].name:
				state += what + " led by " + leaders[0] + "; "
				_, _ = nc.Request(stepdown[what], nil, 2*time.Second)
			}
		}
		if state != "" {
			time.Sleep(200 * time.Millisecond) // pace the polls while the elections run
		}
		return state == ""
	})
}

// leaderOf is the index of the server leading what leader finds in the
// running servers' /jsz (the first that names one), polled until one does.
func (c *chaosRun) leaderOf(what string, leader func(j *jsz) string) int {
	name := ""
	client := &http.Client{Timeout: 2 * time.Second} // a frozen server may not answer
	testkit.WaitForState(c.t, func() string { return "a leader of " + what }, func() bool {
		for _, n := range c.nats {
			if n.proc == nil {
				continue
			}
			resp, err := client.Get(n.ready.Monitor + "/jsz?accounts=true&streams=true")
			if err != nil {
				continue
			}
			var j jsz
			_ = json.NewDecoder(resp.Body).Decode(&j)
			resp.Body.Close()
			if name = leader(&j); name != "" {
				return true
			}
		}
		return false
	})
	return c.serverIndex(name)
}

// metaLeader is the index of the server leading the JetStream metadata.
func (c *chaosRun) metaLeader() int {
	return c.leaderOf("the metadata", func(j *jsz) string { return j.Meta.Leader })
}

// streamLeader is the index of the server leading stream.
func (c *chaosRun) streamLeader(stream string) int {
	return c.leaderOf(stream, func(j *jsz) string {
		for _, a := range j.Accounts {
			for _, st := range a.Streams {
				if st.Name == stream {
					return st.Cluster.Leader
				}
			}
		}
		return ""
	})
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
		name := fmt.Sprintf("p%d-s%d-%d", phase, id, k)
		r := &chaosRequest{name: name, phase: phase, edge: edge, keyed: k%4 == 0}
		if !r.keyed {
			c.post(client, r)
			continue
		}
		// a keyed request goes to two edges at once, as a sender that
		// retries on another address before the first answer
		other := (edge + 1) % 3
		for range 2 {
			if c.live[other].Load() && other != edge {
				break
			}
			other = (other + 1) % 3
		}
		cp := &chaosRequest{name: name, phase: phase, edge: other, keyed: true, copy: true}
		var wg sync.WaitGroup
		wg.Go(func() { c.post(client, r) })
		if other != edge {
			wg.Go(func() { c.post(client, cp) })
		}
		wg.Wait()
	}
}

// post sends r and records its answer.
func (c *chaosRun) post(client *http.Client, r *chaosRequest) {
	req, _ := http.NewRequest(http.MethodPost, c.edges[r.edge].base+"/hooks/agent",
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

// scrapeMetrics reads every live node's /metrics (Caddy's admin API)
// every chaosSample until stop closes, recording how long each took
// (edges) and the node's caddy_hooks_cluster_up.
func (c *chaosRun) scrapeMetrics(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(chaosSample):
		}
		for i, p := range append(c.edges[:], c.delivery) {
			live := func() bool { return i < 3 && c.live[i].Load() || i == 3 && c.dlive.Load() }
			if !live() {
				continue
			}
			start := time.Now()
			resp, err := unixClient(p.admin).Get("http://localhost/metrics")
			took := time.Since(start)
			up := false
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				up = strings.Contains(string(b), "\ncaddy_hooks_cluster_up 1\n")
			}
			c.mu.Lock()
			if live() {
				if i < 3 {
					if err != nil || took > chaosBound { // (not killed meanwhile)
						c.scrErr = append(c.scrErr, fmt.Sprintf("edge %d /metrics in phase %d: %v after %s", i+1, c.phase.Load(), err, took))
					}
					c.scrape = append(c.scrape, took)
				}
				c.upSample = append(c.upSample, upSample{phase: int(c.phase.Load()), node: i, at: start, up: up})
			}
			c.mu.Unlock()
		}
	}
}

// connectedTo is the index of the server node i (0-2: edges, 3: the
// delivery node) is connected to now, through its proxies, or -1.
func (c *chaosRun) connectedTo(i int) int {
	for k, p := range c.clients[i] {
		if p.Conns() > 0 {
			return k
		}
	}
	return -1
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
	stall        bool // a stalled store: chaosStall* timings, no node down longer than chaosLongestOutage in a row
	backWithin   bool // and every node back within chaosBackWithin of the stall's start
}

// chaosOnlyEnv selects faults by number (1-8, comma-separated) for a
// shorter run while working on one; CI runs them all. chaosLogsEnv names
// a directory that receives every node's and server's log when the run
// ends.
const (
	chaosOnlyEnv = "CADDYHOOK_CHAOS_FAULTS"
	chaosLogsEnv = "CADDYHOOK_CHAOS_LOGS"
)

// keepLogs copies every node's and server's logs into dir.
func (c *chaosRun) keepLogs(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Error(err)
		return
	}
	copyFile := func(from, to string) {
		if b, err := os.ReadFile(from); err == nil {
			_ = os.WriteFile(filepath.Join(dir, to), b, 0o644)
		}
	}
	for i, p := range append(c.edges[:], c.delivery) {
		for n := 1; n <= p.runs; n++ {
			copyFile(p.logPath(n), fmt.Sprintf("%s-run%d.log", []string{"e1", "e2", "e3", "d1"}[i], n))
		}
	}
	for _, n := range c.nats {
		for r := 1; r <= n.runs; r++ {
			copyFile(filepath.Join(n.dir, fmt.Sprintf("nats-run%d.log", r)), fmt.Sprintf("%s-run%d.log", n.name, r))
		}
	}
}

func TestClusterChaos(t *testing.T) {
	if err := loopstore.Check(); err != nil {
		t.Fatalf("the fault run stalls NATS stores with fsfreeze on loop-mounted filesystems, and cannot here: %v. "+
			"Run it as root on Linux with util-linux and e2fsprogs (.ci/run does; a container needs --privileged for loop devices)", err)
	}
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
		// cleanups run last first: thaw, stop the server, remove the store
		store := loopstore.New(t, chaosStoreSize)
		c.nats[k] = &natsProc{t: t, bin: natsBin, name: fmt.Sprintf("n%d", k+1), dir: dir, store: store, routes: strings.Join(routeURLs, ",")}
		t.Cleanup(c.nats[k].stop)
		t.Cleanup(func() { _ = store.Thaw() })
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
	c.dlive.Store(true)
	if dir := os.Getenv(chaosLogsEnv); dir != "" {
		t.Cleanup(func() { c.keepLogs(dir) })
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(c.edges[:], c.delivery) {
				t.Logf("--- %s\n%s", p.dir, p.tail(p.runs))
			}
		}
	})

	var victim int
	freeze := func(c *chaosRun) {
		if err := c.nats[victim].store.Freeze(chaosStall + time.Minute); err != nil {
			c.t.Fatal(err)
		}
	}
	thaw := func(c *chaosRun) {
		if err := c.nats[victim].store.Thaw(); err != nil {
			c.t.Fatal(err)
		}
	}
	faults := []chaosFaultDef{
		{name: "kill -9 edge 1", inject: func(c *chaosRun) { c.live[0].Store(false); c.edges[0].kill() },
			heal: func(c *chaosRun) { c.edges[0].start(); c.live[0].Store(true) }},
		{name: "kill -9 delivery node", inject: func(c *chaosRun) { c.dlive.Store(false); c.delivery.kill() },
			heal: func(c *chaosRun) { c.delivery.start(); c.dlive.Store(true) }},
		{name: "kill -9 NATS meta leader",
			inject: func(c *chaosRun) { victim = c.metaLeader(); c.nats[victim].kill(); c.untarget(victim) },
			heal:   func(c *chaosRun) { c.nats[victim].start(); c.retarget(victim) }},
		{name: "SIGSTOP NATS queue leader",
			inject: func(c *chaosRun) {
				victim = c.streamLeader("HOOKS_hooks_QUEUE")
				_ = c.nats[victim].proc.Signal(syscall.SIGSTOP)
			},
			heal: func(c *chaosRun) { _ = c.nats[victim].proc.Signal(syscall.SIGCONT) }},
		{name: "edges 2+3 cut from NATS", inject: func(c *chaosRun) {
			for _, i := range []int{1, 2} {
				for k := range 3 {
					c.clients[i][k].Blackhole(true)
				}
			}
		}, heal: func(c *chaosRun) {
			for _, i := range []int{1, 2} {
				for k := range 3 {
					c.clients[i][k].Blackhole(false)
				}
			}
		}},
		{name: "stalled store: edge 2's server", stall: true, backWithin: true, heal: thaw, inject: func(c *chaosRun) {
			testkit.WaitForState(c.t, func() string { return "edge 2 connected" }, func() bool { victim = c.connectedTo(1); return victim >= 0 })
			c.moveLeaders(victim) // a leader that stalls is the other two faults
			freeze(c)
		}},
		{name: "stalled store: idem leader", stall: true, heal: thaw,
			inject: func(c *chaosRun) { victim = c.streamLeader("KV_hooks_hooks_idem"); freeze(c) }},
		{name: "stalled store: queue leader", stall: true, heal: thaw,
			inject: func(c *chaosRun) { victim = c.streamLeader("HOOKS_hooks_QUEUE"); freeze(c) }},
	}
	run := make([]bool, len(faults))
	for f := range faults {
		run[f] = true
	}
	if only := os.Getenv(chaosOnlyEnv); only != "" {
		clear(run)
		for _, n := range strings.Split(only, ",") {
			var f int
			if _, err := fmt.Sscan(n, &f); err != nil || f < 1 || f > len(faults) {
				t.Fatalf("%s=%s: want fault numbers 1-%d", chaosOnlyEnv, only, len(faults))
			}
			run[f-1] = true
		}
	}

	type phaseInfo struct {
		victim             string    // the server the fault hit, and who was connected where
		begin, start, heal time.Time // the load, the fault, the healing began
		drain              time.Duration
	}
	phases := make([]phaseInfo, len(faults))
	for f, fault := range faults {
		if !run[f] {
			continue
		}
		before, during, after := chaosBefore, chaosFault, chaosAfter
		if fault.stall {
			before, during, after = chaosStallBefore, chaosStall, chaosStallAfter
		}
		c.phase.Store(int32(f))
		phases[f].begin = time.Now()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for s := range chaosSenders {
			wg.Go(func() { c.send(s, stop) })
		}
		wg.Go(func() { c.scrapeMetrics(stop) })
		time.Sleep(before) // load before the fault
		victim = -1
		var conns []string
		for i, n := range []string{"e1", "e2", "e3", "d1"} {
			if k := c.connectedTo(i); k >= 0 {
				conns = append(conns, n+"→"+c.nats[k].name)
			}
		}
		phases[f].start = time.Now()
		fault.inject(c)
		if victim >= 0 {
			phases[f].victim = c.nats[victim].name + "; " + strings.Join(conns, " ")
		}
		time.Sleep(during - time.Since(phases[f].start)) // the fault lasts
		phases[f].heal = time.Now()
		fault.heal(c)
		time.Sleep(after) // load after healing
		close(stop)
		wg.Wait()
		phases[f].drain = c.drain(fault.name)
	}

	// the table and the assertions
	d := delivered(c.gw)
	type row struct {
		requests, ok, r503, r504, r409, noAnswer, late, delivered, dup, lost, r503Delivered int
		maxLat                                                                              time.Duration
	}
	rows := make([]row, len(faults))
	counted := map[string]bool{} // deliveries are counted once per name (a pair shares it)
	lost := map[string]bool{}
	for _, r := range c.reqs {
		w := &rows[r.phase]
		w.requests++
		w.maxLat = max(w.maxLat, r.elapsed)
		n := len(d[r.name])
		if !counted[r.name] {
			counted[r.name] = true
			if n > 0 {
				w.delivered++
			}
			if duplicated(t, r.name, d[r.name]) {
				w.dup++
			}
		}
		switch {
		case r.err != nil:
			w.noAnswer++
			if !(r.phase == 0 && r.edge == 0) {
				t.Errorf("%s (%s, edge %d): no answer: %v", r.name, faults[r.phase].name, r.edge+1, r.err)
			}
			continue
		case r.elapsed > chaosBound:
			w.late++
			t.Errorf("%s (%s, edge %d, keyed %v, copy %v): answered %d after %s, want within %s", r.name, faults[r.phase].name, r.edge+1,
				r.keyed, r.copy, r.status, r.elapsed.Round(time.Millisecond), chaosBound)
		}
		switch r.status {
		case http.StatusOK:
			w.ok++
			if n == 0 && !lost[r.name] {
				lost[r.name] = true
				w.lost++
				t.Errorf("%s (%s): answered 200 and never delivered", r.name, faults[r.phase].name)
			}
		case http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusConflict:
			switch r.status {
			case http.StatusServiceUnavailable:
				w.r503++
				if n > 0 {
					w.r503Delivered++
					if !r.keyed {
						t.Errorf("%s (%s, edge %d): answered 503 and delivered: a retry without a key runs it twice", r.name, faults[r.phase].name, r.edge+1)
					}
				}
			case http.StatusGatewayTimeout:
				w.r504++
			default:
				w.r409++
				if !r.keyed {
					t.Errorf("%s (%s): 409 without an Idempotency-Key", r.name, faults[r.phase].name)
				}
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
	// seconds down per node (cluster_up 0 while sampled during the phase),
	// each node's longest outage (consecutive samples down) and, during a
	// fault, when each node was last seen down after its start
	nodes := []string{"e1", "e2", "e3", "d1"}
	down := make([][4]time.Duration, len(faults))
	back := make([][4]time.Duration, len(faults))
	longest := make([][4]time.Duration, len(faults))
	var since [4]time.Time // the first sample of the outage under way, per node
	lastPhase := -1
	for _, s := range c.upSample {
		if s.phase != lastPhase {
			since, lastPhase = [4]time.Time{}, s.phase
		}
		if s.up {
			since[s.node] = time.Time{}
			continue
		}
		if since[s.node].IsZero() {
			since[s.node] = s.at
		}
		down[s.phase][s.node] += chaosSample
		longest[s.phase][s.node] = max(longest[s.phase][s.node], s.at.Add(chaosSample).Sub(since[s.node]))
		p := phases[s.phase]
		if !s.at.Before(p.start) && s.at.Before(p.heal) {
			back[s.phase][s.node] = max(back[s.phase][s.node], s.at.Add(chaosSample).Sub(p.start))
		}
	}
	for f, fault := range faults {
		if !run[f] || !fault.stall {
			continue
		}
		for i := range nodes {
			if !fault.backWithin {
				continue // a stalled leader: how long is NATS's to say (its election), the table shows it
			}
			if back[f][i] > chaosBackWithin {
				t.Errorf("%s: %s down until %s after the stall's start, want back within %s", fault.name, nodes[i],
					back[f][i].Round(100*time.Millisecond), chaosBackWithin)
			}
			if longest[f][i] > chaosLongestOutage {
				t.Errorf("%s: %s down for %s in a row, want at most %s", fault.name, nodes[i], longest[f][i].Round(100*time.Millisecond), chaosLongestOutage)
			}
		}
	}
	// the longest pause of the gateway's deliveries during each stall
	// (from its start, or the delivery before it, to the next delivery)
	var received []time.Time
	for _, rec := range c.gw.Received() {
		received = append(received, rec.Time)
	}
	slices.SortFunc(received, func(a, b time.Time) int { return a.Compare(b) })
	gap := make([]time.Duration, len(faults))
	for f, fault := range faults {
		if !run[f] || !fault.stall {
			continue
		}
		last := phases[f].start
		for _, at := range received {
			if at.Before(phases[f].start) {
				continue
			}
			gap[f] = max(gap[f], at.Sub(last))
			if at.After(phases[f].heal) {
				break
			}
			last = at
		}
		if fault.backWithin && gap[f] > chaosBackWithin {
			t.Errorf("%s: the gateway got nothing for %s, want deliveries again within %s", fault.name, gap[f].Round(100*time.Millisecond), chaosBackWithin)
		}
	}
	// NATS's "wrong last sequence" (10164) in the nodes' logs, by phase
	wrongSeq := make([]int, len(faults))
	for _, p := range append(c.edges[:], c.delivery) {
		for n := 1; n <= p.runs; n++ {
			b, _ := os.ReadFile(p.logPath(n))
			for line := range strings.Lines(string(b)) {
				if !strings.Contains(line, "10164") {
					continue
				}
				var entry struct{ TS float64 }
				_ = json.Unmarshal([]byte(line), &entry)
				at := time.Unix(0, int64(entry.TS*1e9))
				for f := len(faults) - 1; f >= 0; f-- {
					if run[f] && !at.Before(phases[f].begin) {
						wrongSeq[f]++
						break
					}
				}
			}
		}
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "fault run: 3 NATS (R3, sync always, stores loop-mounted), 3 edges (1, 3: fallback dir; 2: fallback reject), 1 delivery node; "+
		"timeout %s; per phase %s load, fault %s, %s after healing (stalled stores: %s, %s, %s)\n", chaosTimeout,
		chaosBefore, chaosFault, chaosAfter, chaosStallBefore, chaosStall, chaosStallAfter)
	fmt.Fprintf(w, "%-32s %8s %6s %6s %6s %5s %6s %5s %9s %9s %5s %5s %8s %6s %-23s %s\n", "fault", "requests", "200", "503", "504", "409",
		"no-ans", "late", "slowest", "delivered", "dup", "lost", "503-dlvd", "10164", "down s e1/e2/e3/d1", "drain")
	for f, r := range rows {
		if !run[f] {
			continue
		}
		var ds []string
		for i := range nodes {
			ds = append(ds, fmt.Sprintf("%.1f", down[f][i].Seconds()))
		}
		fmt.Fprintf(w, "%-32s %8d %6d %6d %6d %5d %6d %5d %9s %9d %5d %5d %8d %6d %-23s %s\n", faults[f].name, r.requests, r.ok, r.r503, r.r504,
			r.r409, r.noAnswer, r.late, r.maxLat.Round(time.Millisecond), r.delivered, r.dup, r.lost, r.r503Delivered, wrongSeq[f],
			strings.Join(ds, "/"), phases[f].drain.Round(100*time.Millisecond))
	}
	for f := range faults {
		if run[f] && phases[f].victim != "" {
			fmt.Fprintf(w, "%s: %s\n", faults[f].name, phases[f].victim)
		}
	}
	for f, fault := range faults {
		if !run[f] || !fault.stall {
			continue
		}
		var bs []string
		for i, n := range nodes {
			bs = append(bs, fmt.Sprintf("%s %s", n, back[f][i].Round(100*time.Millisecond)))
		}
		var ls []string
		for i, n := range nodes {
			ls = append(ls, fmt.Sprintf("%s %s", n, longest[f][i].Round(100*time.Millisecond)))
		}
		fmt.Fprintf(w, "%s: last seen down after the stall's start: %s; longest outage: %s; longest pause of the deliveries: %s\n",
			fault.name, strings.Join(bs, ", "), strings.Join(ls, ", "), gap[f].Round(100*time.Millisecond))
	}
	fmt.Fprintf(w, "/metrics: %d scrapes of the running edges, slowest %s\n", len(c.scrape), maxScrape.Round(time.Millisecond))
	fmt.Fprintf(w, "(requests: a keyed request is a pair, the same key sent to two edges at once; no-ans: no answer within the client's 15 s (in flight\n"+
		" to edge 1 when it was killed); late: answered after timeout + 1 s; delivered, dup, lost: per event (a pair is one); dup: delivered more\n"+
		" than once, each with one Idempotency-Key; 503-dlvd: answered 503 and delivered (allowed for keyed ones); 10164: \"wrong last sequence\"\n"+
		" log lines of the nodes; down: caddy_hooks_cluster_up 0, sampled every %s; drain: after the load stopped, until every 200 was delivered)\n", chaosSample)
	w.Flush()
	t.Log("\n" + b.String())
}
