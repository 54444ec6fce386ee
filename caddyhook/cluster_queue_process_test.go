package caddyhook

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// clusterProcess is one caddyhook node run as a separate caddy process on
// a listener the test owns, with its admin API on a Unix socket.
type clusterProcess struct {
	*caddyProcess
	base  string
	admin string
}

// startClusterProcess writes and starts a node whose hooks block has
// extra lines besides the tokens.
func startClusterProcess(t *testing.T, bin, name, extra string) *clusterProcess {
	t.Helper()
	return startClusterProcessSite(t, bin, name, extra, "")
}

// startClusterProcessSite is startClusterProcess with site lines after
// the hooks block (a hooks_console route, …).
func startClusterProcessSite(t *testing.T, bin, name, extra, site string) *clusterProcess {
	t.Helper()
	dir, err := os.MkdirTemp("", "chcl"+name) // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	admin := filepath.Join(dir, "admin.sock")
	base := "http://" + ln.Addr().String()
	cf := fmt.Sprintf(`{
	admin unix/%s
	auto_https off
	persist_config off
}
http://%s {
	bind fd/3
	hooks {
		token %s
		gateway_token %s
		%s
	}
	%s
	respond "ready" 200
}
`, admin, ln.Addr(), itHookToken, itGatewayToken, extra, site)
	p := &clusterProcess{caddyProcess: newCaddyProcess(t, bin, dir, cf, base+"/ready", ln), base: base, admin: admin}
	p.start()
	return p
}

// postAgent sends one agent request and returns its runId ("" unless 200).
func postAgent(client *http.Client, base, msg string) (string, int, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/hooks/agent", strings.NewReader(`{"message":"`+msg+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+itHookToken)
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	id := ""
	if resp.StatusCode == http.StatusOK {
		if _, rest, ok := strings.Cut(buf.String(), `"runId":"`); ok {
			id, _, _ = strings.Cut(rest, `"`)
		}
	}
	return id, resp.StatusCode, nil
}

// TestClusterProcessesKilledNothingLost (issue 14, with real caddy
// processes): two edges without a gateway and a delivery node next to it
// share a NATS JetStream server. Events go through both edges; one edge
// is killed with SIGKILL right after its last 200, and the delivery node
// is killed with SIGKILL while deliveries are in flight (the gateway takes
// 100 ms per request), then a second delivery node starts. Counted by
// event id at the gateway: every accepted event arrives, nothing arrives
// that was not accepted, and an event sent twice carries the same
// Idempotency-Key both times. `caddy hooks spool list` works on the
// cluster queue through the admin API.
func TestClusterProcessesKilledNothingLost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs caddy processes; skipped with -short")
	}
	bin := testkit.CaddyBinary(t)
	nats := natstest.Run(t, natstest.Options{})
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Delay: 100 * time.Millisecond})
	cluster := `cluster nats ` + nats.URL() + ` {
			timeout 1s
			ack_wait 2s
			signing_key ` + itClusterKey + `
		}`
	edge := cluster + `
		spool cluster {
			deliver off
			fallback reject
		}`
	delivery := "gateway unix/" + gw.sock + "\n" + cluster + `
		spool cluster {
			fallback reject
			workers 4
		}`
	e1 := startClusterProcess(t, bin, "e1", edge)
	e2 := startClusterProcess(t, bin, "e2", edge)
	d1 := startClusterProcess(t, bin, "d1", delivery)

	const perEdge = 60
	var mu sync.Mutex
	accepted := map[string]bool{}
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(p *clusterProcess, name string) {
		for k := range perEdge {
			id, status, err := postAgent(client, p.base, fmt.Sprintf("%s event %d", name, k))
			if err != nil || id == "" {
				t.Errorf("%s event %d: status %d, %v", name, k, status, err)
				return
			}
			mu.Lock()
			accepted[id] = true
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { send(e1, "e1") })
	wg.Go(func() { send(e2, "e2") })
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	e1.kill() // right after its last 200

	testkit.WaitForState(t, func() string { return "the delivery node has started delivering" }, func() bool { return gw.Count("") >= 8 })
	d1.kill()
	atKill := gw.Count("")
	if atKill >= len(accepted) {
		t.Fatalf("the delivery node had delivered all %d events before the kill", atKill)
	}
	d2 := startClusterProcess(t, bin, "d2", delivery)

	keys, doubled := waitAllDelivered(t, gw, accepted)
	for k := range keys {
		if !accepted[k] {
			t.Errorf("the gateway got Idempotency-Key %q, which no 200 answered", k)
		}
	}
	t.Logf("%d events accepted through two edges (one killed after its last 200); delivery node killed with %d delivered; "+
		"all %d delivered, %d of them twice with the same Idempotency-Key (in flight at the kill)", len(accepted), atKill, len(keys), doubled)

	cli := exec.Command(bin, "hooks", "spool", "list", "--address", "unix/"+d2.admin)
	cli.Env = d2.env()
	var out, errOut bytes.Buffer
	cli.Stdout, cli.Stderr = &out, &errOut
	if err := cli.Run(); err != nil || !strings.Contains(out.String(), "spool cluster:hooks: ") {
		t.Errorf("caddy hooks spool list on the cluster queue: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
}
