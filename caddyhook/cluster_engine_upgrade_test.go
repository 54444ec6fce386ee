//go:build upgrade

package caddyhook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
	"github.com/caddyhook/caddyhook/internal/version"
)

// The upgrade run (issue 30 item 6): nodes of the previous release and of
// this one together under a steady load, replaced one at a time, and once
// back again (a rollback); and the migration to signing_key from a build
// without it. Each builds the earlier commit's binary from a git worktree
// of this repository (a full clone: a shallow one lacks the commit and
// the test says how to fetch it).
//
//	go test -tags upgrade -count=1 -v -timeout 15m -run 'TestRollingUpgrade|TestSigningKeyMigration' ./caddyhook/

// Earlier builds the run uses.
const (
	// previousCommit is the last build before versions (v0.9.0): the
	// formats of the previous release.
	previousCommit = "453004b"
	// unsealedCommit is the last build before signing_key.
	unsealedCommit = "43fd7c0"
)

const (
	upgradeSenders = 4
	upgradePause   = 100 * time.Millisecond // between two requests of a sender
	upgradeBefore  = 5 * time.Second        // load before a node is replaced
	upgradeAfter   = 6 * time.Second        // load after it is back
	upgradeDrain   = 90 * time.Second
)

// buildAt builds ./cmd/caddy of commit from a git worktree of this
// repository.
func buildAt(t *testing.T, commit string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s is not in this clone (%s%v): the upgrade run builds it. In a shallow clone run `git fetch --unshallow` "+
			"(or `git fetch origin %s`), then run the test again", commit, out, err, commit)
	}
	dir := filepath.Join(t.TempDir(), "src-"+commit)
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", dir, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", commit, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", dir).Run() })
	bin := filepath.Join(t.TempDir(), "caddy-"+commit)
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/caddy")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/caddy at %s: %v\n%s", commit, err, out)
	}
	return bin
}

// upgradeRequest is one request of the load and its answer.
type upgradeRequest struct {
	name    string
	step    int
	node    int
	keyed   bool
	wake    bool
	status  int
	err     error
	restart bool // the node was being replaced while it was in flight
}

// upgradeRun is the cluster under load.
type upgradeRun struct {
	t     *testing.T
	nodes []*clusterProcess
	gw    *testGateway
	live  []atomic.Bool
	// restarting is the node being replaced (-1: none)
	restarting atomic.Int32
	step       atomic.Int32
	mu         sync.Mutex
	reqs       []*upgradeRequest
}

// send runs one sender until stop closes, round-robin over the live nodes.
func (u *upgradeRun) send(id int, stop <-chan struct{}) {
	client := &http.Client{Timeout: 15 * time.Second}
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		case <-time.After(upgradePause):
		}
		node := (id + k) % len(u.nodes)
		for range u.nodes {
			if u.live[node].Load() {
				break
			}
			node = (node + 1) % len(u.nodes)
		}
		step := int(u.step.Load())
		r := &upgradeRequest{name: fmt.Sprintf("s%d-%d-%d", step, id, k), step: step, node: node, keyed: k%4 == 0, wake: k%5 == 2}
		path, body := "/hooks/agent", `{"message":"`+namedMessage(r.name, "upgrade load")+`"}`
		if r.wake {
			path, body = "/hooks/wake", `{"text":"`+namedMessage(r.name, "upgrade load")+`"}`
		}
		req, _ := http.NewRequest(http.MethodPost, u.nodes[node].base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+itHookToken)
		if r.keyed {
			req.Header.Set("Idempotency-Key", "key-"+r.name)
		}
		resp, err := client.Do(req)
		r.restart = int(u.restarting.Load()) == node
		if err != nil {
			r.err = err
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.status = resp.StatusCode
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, r)
		u.mu.Unlock()
	}
}

// replace stops node i and starts it again with bin.
func (u *upgradeRun) replace(i int, bin string) {
	u.live[i].Store(false)
	u.restarting.Store(int32(i))
	time.Sleep(300 * time.Millisecond) // the requests already sent to it come back
	p := u.nodes[i]
	p.stop()
	p.bin = bin
	p.start()
	u.restarting.Store(-1)
	u.live[i].Store(true)
}

// clusterLevel reads caddy_hooks_cluster_level from node p's /metrics
// (-1: absent, as on a build before v0.9.0).
func clusterLevel(p *clusterProcess) float64 {
	resp, err := unixClient(p.admin).Get("http://localhost/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "caddy_hooks_cluster_level "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}

// TestRollingUpgrade: a three-server NATS cluster (R3, sync always), three
// nodes that accept and deliver (spool cluster, a fallback directory
// each) and an edge with a local spool, all built from previousCommit,
// under a steady load of agent and wake events (one in four with an
// Idempotency-Key) spread over the live nodes; the nodes are replaced one
// at a time with this build, then node 2 and the spool edge are rolled
// back to previousCommit. Asserted: every acknowledged event is delivered
// (lost 0), an event delivered more than once carries one
// Idempotency-Key, and no request is answered 5xx (or unanswered) but by
// the node being replaced; the cluster version gate is 0 while a node of
// previousCommit runs and 1 once none does.
func TestRollingUpgrade(t *testing.T) {
	oldBin := buildAt(t, previousCommit)
	newBin := testkit.CaddyBinary(t)
	natsBin := buildNatsDev(t)

	var servers [3]*natsProc
	var routes [3]*natstest.Proxy
	var routeURLs, clientURLs []string
	for k := range 3 {
		routes[k] = natstest.NewProxy(t, "")
		routeURLs = append(routeURLs, "nats-route://"+routes[k].Addr())
	}
	for k := range 3 {
		dir := t.TempDir()
		servers[k] = &natsProc{t: t, bin: natsBin, name: fmt.Sprintf("n%d", k+1), dir: dir, routes: strings.Join(routeURLs, ",")}
		t.Cleanup(servers[k].stop)
		servers[k].start()
		routes[k].SetTarget(strings.TrimPrefix(servers[k].ready.Route, "nats-route://"))
		clientURLs = append(clientURLs, servers[k].ready.Client)
	}
	natstest.WaitJetStream(t, clientURLs)

	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	u := &upgradeRun{t: t, gw: gw}
	u.restarting.Store(-1)
	fallbacks := t.TempDir()
	for i := range 3 {
		u.nodes = append(u.nodes, startClusterProcess(t, oldBin, fmt.Sprintf("n%d", i+1), "gateway unix/"+gw.sock+`
		gateway_timeout 4s
		cluster nats `+strings.Join(clientURLs, " ")+` {
			replicas 3
			timeout 2s
			ack_wait 5s
			signing_key `+itClusterKey+`
		}
		spool cluster {
			fallback `+filepath.Join(fallbacks, fmt.Sprintf("n%d", i+1))+`
			retry_initial 100ms
			retry_max 1s
			workers 4
		}`))
	}
	u.nodes = append(u.nodes, startClusterProcess(t, oldBin, "spool", "gateway unix/"+gw.sock+`
		spool `+t.TempDir()+` {
			retry_initial 100ms
			retry_max 1s
		}`))
	u.live = make([]atomic.Bool, len(u.nodes))
	for i := range u.live {
		u.live[i].Store(true)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range u.nodes {
				t.Logf("--- %s\n%s", p.dir, p.tail(p.runs))
			}
		}
	})

	steps := []struct {
		name string
		node int
		bin  string
	}{
		{"upgrade node 1", 0, newBin},
		{"upgrade node 2", 1, newBin},
		{"upgrade node 3", 2, newBin},
		{"upgrade the spool edge", 3, newBin},
		{"rollback node 2", 1, oldBin},
		{"rollback the spool edge", 3, oldBin},
	}
	// node 1's caddy_hooks_cluster_level after each step: every node of
	// this build runs at the top level; a node of the previous build
	// still live makes it 0
	top := float64(version.ClusterLevel)
	wantLevels := []float64{0, 0, top, top, 0, 0}
	levels := make([]float64, len(steps))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range upgradeSenders {
		wg.Go(func() { u.send(s, stop) })
	}
	for i, st := range steps {
		u.step.Store(int32(i))
		time.Sleep(upgradeBefore)
		u.replace(st.node, st.bin)
		time.Sleep(upgradeAfter)
		levels[i] = clusterLevel(u.nodes[0]) // node 1 runs this build from the first step on
		if wantLevels[i] == top && levels[i] != top {
			// The gate errs low: it holds 0 for cluster.GateHold after
			// node 1's engine is reachable again (a probe that timed out
			// on a busy machine), as after the last old node's last
			// announcement. Low for a while is allowed, never high:
			// wait for it to rise.
			testkit.Eventually(3*cluster.GateHold, func() bool { levels[i] = clusterLevel(u.nodes[0]); return levels[i] == top })
		}
	}
	close(stop)
	wg.Wait()

	// every acknowledged event delivered
	start := time.Now()
	var missing int
	testkit.WaitForState(t, func() string { return fmt.Sprintf("every acknowledged event delivered (%d missing)", missing) }, func() bool {
		d := delivered(gw)
		missing = 0
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, r := range u.reqs {
			if r.status == http.StatusOK && len(d[r.name]) == 0 {
				missing++
			}
		}
		return missing == 0 || time.Since(start) > upgradeDrain
	})

	type row struct{ requests, acked, delivered, dup, lost, fivexx, unanswered int }
	rows := make([]row, len(steps))
	d := delivered(gw)
	for _, r := range u.reqs {
		w := &rows[r.step]
		w.requests++
		n := len(d[r.name])
		if duplicated(t, r.name, d[r.name]) {
			w.dup++
		}
		switch {
		case r.err != nil:
			w.unanswered++
			if !r.restart {
				t.Errorf("%s (%s, node %d): no answer: %v", r.name, steps[r.step].name, r.node+1, r.err)
			}
		case r.status == http.StatusOK:
			w.acked++
			if n > 0 {
				w.delivered++
			} else {
				w.lost++
				t.Errorf("%s (%s, node %d): acknowledged and never delivered", r.name, steps[r.step].name, r.node+1)
			}
		case r.status >= 500:
			w.fivexx++
			if !r.restart {
				t.Errorf("%s (%s, node %d): %d from a node not being replaced", r.name, steps[r.step].name, r.node+1, r.status)
			}
		default:
			t.Errorf("%s: status %d", r.name, r.status)
		}
	}
	for i, l := range levels {
		if l != wantLevels[i] {
			t.Errorf("after %q node 1's caddy_hooks_cluster_level is %v, want %v", steps[i].name, l, wantLevels[i])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "upgrade run: 3 NATS servers (R3, sync always), 3 cluster nodes and a local-spool edge built from %s, replaced one at a time by this build; "+
		"%d senders, a request every %s each; per step %s of load, the replacement, %s of load\n", previousCommit, upgradeSenders, upgradePause,
		upgradeBefore, upgradeAfter)
	fmt.Fprintf(&b, "%-26s %8s %12s %9s %10s %5s %4s %6s %6s\n", "step", "requests", "acknowledged", "delivered", "duplicated", "lost", "5xx", "no-ans", "level")
	for i, r := range rows {
		fmt.Fprintf(&b, "%-26s %8d %12d %9d %10d %5d %4d %6d %6.0f\n", steps[i].name, r.requests, r.acked, r.delivered, r.dup, r.lost, r.fivexx,
			r.unanswered, levels[i])
	}
	fmt.Fprintf(&b, "(acknowledged: answered 200; duplicated: delivered more than once, each time with the one Idempotency-Key; 5xx and no-ans: only from the node being replaced;\n"+
		" level: caddy_hooks_cluster_level on node 1 after the step, the lowest cluster level among the live nodes: 0 while a node of the previous build runs)\n")
	t.Log("\n" + b.String())
	_ = os.Stdout.Sync()
}

// postNamed sends one named agent (or wake) request to base, with an
// Idempotency-Key when key is set, and returns the status and the runId.
func postNamed(client *http.Client, base, name string, wake bool, key string) (int, string, error) {
	path, body := "/hooks/agent", `{"message":"`+namedMessage(name, "migration")+`"}`
	if wake {
		path, body = "/hooks/wake", `{"text":"`+namedMessage(name, "migration")+`"}`
	}
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+itHookToken)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	id := ""
	if _, rest, ok := strings.Cut(string(b), `"runId":"`); ok {
		id, _, _ = strings.Cut(rest, `"`)
	}
	return resp.StatusCode, id, nil
}

// TestSigningKeyMigrationDropsNothing (issue 30 item 3): the README's
// migration to signing_key, with a build without it (unsealedCommit)
// and this one, drops nothing. An edge and a delivery node of the old
// build run; the delivery node dead-letters one event and stops; the old
// edge queues events (agent runs and wake events, some with an
// Idempotency-Key), unsealed. A delivery node of this build with
// signing_key and accept_unsealed_until delivers every one of them, once.
// The edge is replaced by this build: a keyed request sent again is
// answered from the old build's idempotency record (same runId, nothing
// dispatched again), and the old dead letter is listed and retried.
func TestSigningKeyMigrationDropsNothing(t *testing.T) {
	oldBin := buildAt(t, unsealedCommit)
	newBin := testkit.CaddyBinary(t)
	srv := natstest.Run(t, natstest.Options{})
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	gw.FailWith(func(kind string) int {
		if kind == "wake" {
			return http.StatusBadRequest // the first wake becomes a dead letter
		}
		return 0
	})
	oldCluster := `cluster nats ` + srv.URL() + ` {
			timeout 2s
			ack_wait 5s
		}`
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	newCluster := `cluster nats ` + srv.URL() + ` {
			timeout 2s
			ack_wait 5s
			signing_key ` + itClusterKey + `
			accept_unsealed_until ` + until + `
		}`
	edgeSpool := `
		spool cluster {
			deliver off
			fallback reject
		}`
	delivSpool := `
		spool cluster {
			fallback reject
			retry_initial 100ms
			retry_max 1s
		}`
	edge := startClusterProcess(t, oldBin, "edge", oldCluster+edgeSpool)
	deliv := startClusterProcess(t, oldBin, "deliv", "gateway unix/"+gw.sock+"\n\t\t"+oldCluster+delivSpool)
	client := &http.Client{Timeout: 15 * time.Second}

	// the old build dead-letters a wake
	if status, _, err := postNamed(client, edge.base, "dead-wake", true, ""); status != http.StatusOK {
		t.Fatalf("dead-wake: %d, %v", status, err)
	}
	testkit.WaitForState(t, func() string { return "the old delivery node dead-letters the wake" }, func() bool {
		var st []struct {
			Spool struct {
				DeadLetters int `json:"dead_letters"`
			} `json:"spool"`
		}
		resp, err := unixClient(deliv.admin).Get("http://localhost/hooks/")
		return err == nil && jsonDecode(resp, &st) == nil && len(st) == 1 && st[0].Spool.DeadLetters == 1
	})
	deliv.stop()
	gw.FailWith(nil)

	// the old edge queues events, unsealed, that nobody delivers yet
	type sent struct {
		name, key, runID string
		wake             bool
	}
	var queued []sent
	for i := range 30 {
		s := sent{name: fmt.Sprintf("old-%d", i), wake: i%5 == 3}
		if i%4 == 0 && !s.wake {
			s.key = "migration-key-" + strconv.Itoa(i)
		}
		status, id, err := postNamed(client, edge.base, s.name, s.wake, s.key)
		if status != http.StatusOK {
			t.Fatalf("%s on the old edge: %d, %v", s.name, status, err)
		}
		s.runID = id
		queued = append(queued, s)
	}
	if n := len(delivered(gw)); n != 0 {
		t.Fatalf("%d events delivered before this build's delivery node started", n)
	}

	// this build delivers them (delivery nodes first)
	newDeliv := startClusterProcess(t, newBin, "newdeliv", "gateway unix/"+gw.sock+"\n\t\t"+newCluster+delivSpool)
	var missing int
	testkit.WaitForState(t, func() string { return fmt.Sprintf("every event the old edge queued delivered (%d missing)", missing) }, func() bool {
		d := delivered(gw)
		missing = 0
		for _, s := range queued {
			if len(d[s.name]) == 0 {
				missing++
			}
		}
		return missing == 0
	})

	// then the edges: a keyed request again is answered from the old
	// build's record
	edge.stop()
	edge.bin = newBin
	if err := os.WriteFile(edge.config, []byte(strings.Replace(mustRead(t, edge.config), oldCluster, newCluster, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	edge.start()
	honoured := 0
	for _, s := range queued {
		if s.key == "" {
			continue
		}
		status, id, err := postNamed(client, edge.base, s.name, false, s.key)
		if status != http.StatusOK || id != s.runID {
			t.Errorf("%s again on this build's edge: %d runId %q (%v), want 200 %q from the old build's record", s.name, status, id, err, s.runID)
		} else {
			honoured++
		}
	}

	// the old dead letter: listed by this build, retried, delivered
	var dead []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	resp, err := unixClient(newDeliv.admin).Get("http://localhost/hooks/spool/dead")
	if err != nil {
		t.Fatal(err)
	}
	if err := jsonDecode(resp, &dead); err != nil || len(dead) != 1 || dead[0].Kind != "wake" {
		t.Fatalf("dead letters on this build: %+v, %v", dead, err)
	}
	resp, err = unixClient(newDeliv.admin).Post("http://localhost/hooks/spool/dead/retry", "application/json", strings.NewReader(`{"all":true}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: %v %v", resp, err)
	}
	resp.Body.Close()
	testkit.WaitForState(t, func() string { return "the old dead letter delivered after the retry" }, func() bool { return len(delivered(gw)["dead-wake"]) == 1 })

	d := delivered(gw)
	dup, lost := 0, 0
	for _, s := range queued {
		if len(d[s.name]) == 0 {
			lost++
		}
		if duplicated(t, s.name, d[s.name]) {
			dup++
		}
	}
	keyed := 0
	for _, s := range queued {
		if s.key != "" {
			keyed++
		}
	}
	if lost != 0 || honoured != keyed {
		t.Errorf("lost %d, keyed requests honoured %d of %d", lost, honoured, keyed)
	}
	t.Logf("\nsigning_key migration from %s: queued on the old build %d (%d keyed), delivered by this build %d, duplicated %d, lost %d; "+
		"keyed requests answered from the old build's records %d of %d; the old build's dead letter listed, retried and delivered",
		unsealedCommit, len(queued), keyed, len(queued)-lost, dup, lost, honoured, keyed)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
