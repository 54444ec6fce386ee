package caddyhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// spoolRegistryMetrics reads the caddy_hooks_spool_* series from the running
// config's metrics registry (the one Caddy's admin /metrics serves).
func spoolRegistryMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	ctx := caddy.ActiveContext()
	mfs, err := ctx.GetMetricsRegistry().Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	m := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "caddy_hooks_spool_") || len(mf.GetMetric()) != 1 {
			continue
		}
		pm := mf.GetMetric()[0]
		switch {
		case pm.GetGauge() != nil:
			m[mf.GetName()] = pm.GetGauge().GetValue()
		case pm.GetCounter() != nil:
			m[mf.GetName()] = pm.GetCounter().GetValue()
		}
	}
	if len(m) == 0 {
		t.Fatal("no caddy_hooks_spool_ metrics in the active registry")
	}
	return m
}

// spoolLoad is the outcome of postAgentsConcurrently.
type spoolLoad struct {
	runIDs  map[string]bool // runIds of the 200s
	refused []result        // 503s
	other   map[int]int     // any other status (0: no answer)
}

// postAgentsConcurrently sends agent requests from to to-1 from clients
// goroutines and sorts the answers.
func postAgentsConcurrently(t *testing.T, in *ingress, from, to, clients int) spoolLoad {
	t.Helper()
	load := spoolLoad{runIDs: map[string]bool{}, other: map[int]int{}}
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range jobs {
				r, err := in.tryPost("/hooks/agent", fmt.Sprintf(`{"message":"spooled event %d"}`, i))
				var reply struct{ RunID string }
				mu.Lock()
				switch {
				case err != nil:
					load.other[0]++
				case r.status == http.StatusOK && json.Unmarshal([]byte(r.body), &reply) == nil && reply.RunID != "":
					load.runIDs[reply.RunID] = true
				case r.status == http.StatusServiceUnavailable:
					load.refused = append(load.refused, r)
				default:
					load.other[r.status]++
				}
				mu.Unlock()
			}
		})
	}
	for i := from; i < to; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(load.other) != 0 {
		t.Fatalf("unexpected answers by status (0 = none): %v", load.other)
	}
	return load
}

// tryPost is post for goroutines: it reports a failed exchange instead of
// failing the test.
func (in *ingress) tryPost(path, body string) (result, error) {
	req, err := http.NewRequest(http.MethodPost, in.base+path, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+itHookToken)
	resp, err := in.client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// awaitSpoolDrain waits until the gateway holds want distinct keys and the
// spool is empty, and returns the last metrics read.
func awaitSpoolDrain(t *testing.T, in *ingress, want int) map[string]float64 {
	t.Helper()
	var m map[string]float64
	testkit.WaitForState(t, func() string {
		return fmt.Sprintf("not drained: gateway has %d of %d keys; metrics %v", in.gw.DistinctKeys(), want, m)
	}, func() bool {
		m = spoolRegistryMetrics(t)
		return in.gw.DistinctKeys() >= want && m["caddy_hooks_spool_depth"] == 0
	})
	return m
}

// checkDelivered fails unless the gateway's distinct keys are exactly the
// accepted runIds (wake events, which carry no runId, aside).
func checkDelivered(t *testing.T, in *ingress, accepted map[string]bool) {
	t.Helper()
	delivered := map[string]bool{}
	for _, r := range in.gw.Received() {
		if r.Kind == "agent" && r.Status == http.StatusOK {
			delivered[r.IdempotencyKey] = true
		}
	}
	for id := range accepted {
		if !delivered[id] {
			t.Errorf("accepted event %s was never delivered", id)
		}
	}
	for id := range delivered {
		if !accepted[id] {
			t.Errorf("delivered event %s was never answered as a runId", id)
		}
	}
}

func TestIntegrationSpoolOutageRetries(t *testing.T) {
	in := startIngress(t, ingressOpts{noGW: true, hooks: `spool ` + t.TempDir() + ` {
			retry_initial 20ms
			retry_max 100ms
		}`})
	const perPhase, wakes = 150, 6
	accepted := map[string]bool{}
	wake := func(i int) {
		if r := in.post("/hooks/wake", fmt.Sprintf(`{"text":"wake %d"}`, i)); r.status != 200 || r.json(t)["mode"] != "now" {
			t.Fatalf("wake %d during the outage: %d %s", i, r.status, r.body)
		}
	}

	// phase 1: the gateway answers 503 to everything
	in.gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
	in.startGateway()
	for i := range wakes / 2 {
		wake(i)
	}
	for id := range postAgentsConcurrently(t, in, 0, perPhase, 16).runIDs {
		accepted[id] = true
	}
	testkit.WaitForState(t, func() string { return "no retry counted while the gateway answered 503" }, func() bool {
		return spoolRegistryMetrics(t)["caddy_hooks_spool_retries_total"] > 0
	})

	// phase 2: the gateway is gone, its socket removed
	in.stopGateway()
	for i := wakes / 2; i < wakes; i++ {
		wake(i)
	}
	for id := range postAgentsConcurrently(t, in, perPhase, 2*perPhase, 16).runIDs {
		accepted[id] = true
	}
	if len(accepted) != 2*perPhase {
		t.Fatalf("%d of %d accepted during the outage", len(accepted), 2*perPhase)
	}
	if n := in.gw.Count(""); n != 0 {
		t.Fatalf("the gateway accepted %d events during the outage", n)
	}
	during := spoolRegistryMetrics(t)
	if during["caddy_hooks_spool_depth"] != 2*perPhase+wakes {
		t.Fatalf("depth %v during the outage, want %d", during["caddy_hooks_spool_depth"], 2*perPhase+wakes)
	}

	// phase 3: the gateway is back
	in.gw.FailWith(nil)
	in.startGateway()
	m := awaitSpoolDrain(t, in, 2*perPhase+wakes)
	checkDelivered(t, in, accepted)
	var order []string
	for _, r := range in.gw.Received() {
		if r.Kind == "wake" {
			order = append(order, fmt.Sprint(r.Body["text"]))
		}
	}
	for i, text := range order {
		if want := fmt.Sprintf("wake %d", i); text != want {
			t.Fatalf("wake delivery order %q, want wake 0 … wake %d in order", order, wakes-1)
		}
	}
	if len(order) != wakes {
		t.Fatalf("%d wakes delivered, want %d", len(order), wakes)
	}
	t.Logf("metrics during the outage %v; after the drain %v", during, m)
	if m["caddy_hooks_spool_retries_total"] == 0 || m["caddy_hooks_spool_depth"] != 0 || m["caddy_hooks_spool_dead_letters"] != 0 ||
		m["caddy_hooks_spool_deliveries_total"] < 2*perPhase+wakes {
		t.Fatalf("after the drain: %v; want retries > 0, depth 0, no dead letters, %d+ deliveries", m, 2*perPhase+wakes)
	}
}

func TestIntegrationSpoolBackpressure(t *testing.T) {
	const maxBytes = 16 << 10
	in := startIngress(t, ingressOpts{noGW: true, hooks: `spool ` + t.TempDir() + ` {
			max_bytes ` + strconv.Itoa(maxBytes) + `
			retry_initial 20ms
			retry_max 100ms
		}`})
	load := postAgentsConcurrently(t, in, 0, 200, 16)
	if len(load.runIDs) == 0 || len(load.refused) == 0 {
		t.Fatalf("%d accepted, %d refused: want both with a %d-byte spool", len(load.runIDs), len(load.refused), maxBytes)
	}
	for _, r := range load.refused {
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || secs < 1 {
			t.Fatalf("503 with Retry-After %q, want whole seconds ≥ 1", r.header.Get("Retry-After"))
		}
		if e := r.json(t); e["ok"] != false || e["error"] != "spool full; retry later" {
			t.Fatalf("503 body %s", r.body)
		}
	}
	m := spoolRegistryMetrics(t)
	t.Logf("%d accepted, %d refused; metrics while full %v", len(load.runIDs), len(load.refused), m)
	// Append enforces max_bytes; a failed attempt then stores its reason
	// (at most 256 bytes) with the queued event, which may exceed it a little.
	slack := m["caddy_hooks_spool_depth"] * (256 + 8)
	if m["caddy_hooks_spool_bytes"] > maxBytes+slack || m["caddy_hooks_spool_depth"] != float64(len(load.runIDs)) {
		t.Fatalf("spool holds %v bytes in %v events; want ≤ %d (+%v for failure reasons) bytes, %d events",
			m["caddy_hooks_spool_bytes"], m["caddy_hooks_spool_depth"], maxBytes, slack, len(load.runIDs))
	}

	in.startGateway()
	awaitSpoolDrain(t, in, len(load.runIDs))
	checkDelivered(t, in, load.runIDs)

	// the drained spool has room again
	again := postAgentsConcurrently(t, in, 200, 210, 2)
	if len(again.runIDs) != 10 {
		t.Fatalf("after the drain: %d of 10 accepted, %d refused", len(again.runIDs), len(again.refused))
	}
	for id := range again.runIDs {
		load.runIDs[id] = true
	}
	awaitSpoolDrain(t, in, len(load.runIDs))
	checkDelivered(t, in, load.runIDs)
}

// TestSpoolCorruptFileAtStart: a spool file of garbage does not keep Caddy
// from starting (before, bbolt panicked or the process died of SIGBUS):
// the file is moved aside, a fresh spool takes events, and the log says
// what happened and where the file went.
func TestSpoolCorruptFileAtStart(t *testing.T) {
	dir := t.TempDir()
	noise := bytes.Repeat([]byte("not a bbolt page; "), 4096)
	if err := os.WriteFile(filepath.Join(dir, spool.DBFile), noise, 0o600); err != nil {
		t.Fatal(err)
	}
	in := startIngress(t, ingressOpts{hooks: `spool ` + dir})
	if r := in.post("/hooks/wake", `{"text":"after a corrupt spool"}`); r.status != http.StatusOK {
		t.Fatalf("wake: %d %s", r.status, r.body)
	}
	moved, _ := filepath.Glob(filepath.Join(dir, spool.DBFile+".corrupt-*"))
	if len(moved) != 1 {
		t.Fatalf("moved files %v", moved)
	}
	if got, _ := os.ReadFile(moved[0]); !bytes.Equal(got, noise) {
		t.Fatal("the moved file differs from the corrupt one")
	}
	logs := in.logs()
	if !strings.Contains(logs, "the spool file was corrupt") || !strings.Contains(logs, moved[0]) {
		t.Fatalf("log does not report the move:\n%s", logs)
	}
}
