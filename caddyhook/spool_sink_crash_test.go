package caddyhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// caddyProcess runs the built caddy binary on one Caddyfile as a separate
// process that can be killed and started again. The test owns the
// listening sockets and hands them to every run (ExtraFiles, `bind fd/N`
// in the Caddyfile), so the ports stay the test's across a kill and
// nothing else can take them.
type caddyProcess struct {
	t        *testing.T
	bin      string
	dir      string // HOME and XDG dirs, the Caddyfile, the logs
	config   string
	readyURL string
	files    []*os.File // the listeners handed over: fd 3, 4, … in the child
	proc     *os.Process
	exited   chan error // receives the exit of proc
	runs     int
}

// newCaddyProcess writes caddyfile into dir; start runs it. The process
// is stopped when the test ends.
func newCaddyProcess(t *testing.T, bin, dir, caddyfile, readyURL string, listeners ...net.Listener) *caddyProcess {
	t.Helper()
	p := &caddyProcess{t: t, bin: bin, dir: dir, config: filepath.Join(dir, "Caddyfile"), readyURL: readyURL}
	for _, ln := range listeners {
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		p.files = append(p.files, f)
	}
	if err := os.WriteFile(p.config, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

// env confines Caddy's home, config and data dirs to the test dir.
func (p *caddyProcess) env() []string {
	return append(os.Environ(), "HOME="+p.dir, "XDG_CONFIG_HOME="+filepath.Join(p.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(p.dir, "data"))
}

// logPath is where the output of run n goes.
func (p *caddyProcess) logPath(n int) string {
	return filepath.Join(p.dir, fmt.Sprintf("caddy-run%d.log", n))
}

// tail returns the end of run n's output, for failure messages.
func (p *caddyProcess) tail(n int) string {
	b, _ := os.ReadFile(p.logPath(n))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// start runs caddy and waits until readyURL answers 200.
func (p *caddyProcess) start() {
	p.t.Helper()
	p.runs++
	logf, err := os.Create(p.logPath(p.runs))
	if err != nil {
		p.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, "run", "--config", p.config, "--adapter", "caddyfile")
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env(), logf, logf
	cmd.ExtraFiles = p.files
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.proc, p.exited = cmd.Process, make(chan error, 1)
	go func(exited chan<- error) { exited <- cmd.Wait() }(p.exited)
	client := &http.Client{Timeout: time.Second}
	ready := func() bool {
		select {
		case err := <-p.exited:
			p.proc = nil
			p.t.Fatalf("caddy exited while starting: %v\n%s", err, p.tail(p.runs))
		default:
		}
		resp, err := client.Get(p.readyURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !testkit.Eventually(60*time.Second, ready) {
		p.t.Fatalf("caddy not ready after 60s\n%s", p.tail(p.runs))
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *caddyProcess) kill() {
	p.t.Helper()
	if err := p.proc.Kill(); err != nil {
		p.t.Fatalf("kill -9: %v", err)
	}
	<-p.exited
	p.proc = nil
}

// stop ends a running process gracefully, or kills it after 10s.
func (p *caddyProcess) stop() {
	if p.proc == nil {
		return
	}
	_ = p.proc.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.proc.Kill()
		<-p.exited
	}
	p.proc = nil
}

// unixClient is an HTTP client that reaches every URL through the Unix
// socket sock (Caddy's admin endpoint in the tests).
func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

// scrapeSpoolMetrics reads the unlabelled caddy_hooks_spool_* series from
// the /metrics endpoint of Caddy's admin API on the Unix socket sock.
func scrapeSpoolMetrics(t *testing.T, sock string) map[string]float64 {
	t.Helper()
	resp, err := unixClient(sock).Get("http://localhost/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d", sock, resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "caddy_hooks_spool_") {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		m[name] = v
	}
	if len(m) == 0 {
		t.Fatalf("no caddy_hooks_spool_ metrics at %s", sock)
	}
	return m
}

// crashTally collects the outcome of the requests of the crash test.
type crashTally struct {
	mu       sync.Mutex
	runIDs   map[string]string // request name (crash-NNNNN) → runId of its 200
	byGen    map[int32]int     // 200s by the ingress run they were sent to
	statuses map[int]int       // non-200 answers
	connErrs int               // attempts that got no answer (the kill)
	given    int               // keyless requests given up after no answer
	accepted int64             // 200s so far
	mark     int64             // reached is closed when accepted reaches mark
	reached  chan struct{}
}

// newCrashTally returns an empty tally for n requests whose reached
// channel closes at the mark-th 200.
func newCrashTally(n, mark int) *crashTally {
	return &crashTally{runIDs: make(map[string]string, n), byGen: map[int32]int{}, statuses: map[int]int{},
		mark: int64(mark), reached: make(chan struct{})}
}

// run sends n agent requests from clients concurrent clients. An attempt
// that gets no answer (the ingress was killed) is not accepted. Even
// requests carry their own Idempotency-Key and are then sent again with
// the same key, as a webhook sender would; odd ones carry none and are
// given up. gen tells which ingress run is up.
func (c *crashTally) run(base string, n, clients int, gen *atomic.Int32, deadline time.Time) {
	tr := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range jobs {
				c.send(client, base, i, gen, deadline)
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// send posts request i until it is answered (keyless: once) or the
// deadline passes.
func (c *crashTally) send(client *http.Client, base string, i int, gen *atomic.Int32, deadline time.Time) {
	keyed := i%2 == 0
	key := fmt.Sprintf("crash-%05d", i)
	body := fmt.Sprintf(`{"message":"crash test event %d"}`, i)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodPost, base+"/hooks/agent", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+itHookToken)
		if keyed {
			req.Header.Set("Idempotency-Key", key)
		}
		g := gen.Load()
		resp, err := client.Do(req)
		var reply struct {
			OK    bool   `json:"ok"`
			RunID string `json:"runId"`
		}
		status := 0
		if err == nil {
			status = resp.StatusCode
			err = json.NewDecoder(resp.Body).Decode(&reply)
			resp.Body.Close()
		}
		c.mu.Lock()
		switch {
		case err != nil:
			c.connErrs++
			if !keyed {
				c.given++
			}
		case status == http.StatusOK && reply.OK && reply.RunID != "":
			c.runIDs[key] = reply.RunID
			c.byGen[g]++
			if c.accepted++; c.accepted == c.mark {
				close(c.reached)
			}
		default:
			c.statuses[status]++
		}
		c.mu.Unlock()
		if err == nil || !keyed {
			return
		}
		// resend at once: the test holds the listening socket, so the
		// new attempt waits in its backlog until caddy runs again
	}
}

// TestSpoolCrashRecovery is issue #5's acceptance test: the ingress, a
// separate caddy process with a spool, is killed with SIGKILL while 64
// clients send 5,000 agent requests, and started again; the gateway
// comes up only after that. Every runId answered with a 200 must reach
// the gateway as an Idempotency-Key (duplicates allowed, losses not).
// Requests with a client Idempotency-Key are resent after the kill and
// must all end accepted; the gateway may see more distinct keys than
// 200s only from keyless requests that were stored but never answered.
func TestSpoolCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs caddy processes; skipped with -short")
	}
	const (
		total     = 5000
		clients   = 64
		killAfter = total * 40 / 100
	)
	bin := testkit.CaddyBinary(t)
	dir, err := os.MkdirTemp("", "chcrash") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock, spoolDir, adminSock := filepath.Join(dir, "gw.sock"), filepath.Join(dir, "spool"), filepath.Join(dir, "admin.sock")
	// the test holds the ingress's listening socket for its whole run and
	// hands it to each caddy run as fd 3: requests sent while caddy is down
	// wait in the socket's backlog for the restarted process
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()
	p := newCaddyProcess(t, bin, dir, fmt.Sprintf(`{
	admin unix/%[1]s
	auto_https off
	persist_config off
}
http://%[2]s {
	bind fd/3
	hooks {
		token %[3]s
		gateway unix/%[4]s
		gateway_token %[5]s
		spool %[6]s {
			retry_initial 20ms
			retry_max 200ms
		}
	}
	respond "ready" 200
}
`, adminSock, ln.Addr(), itHookToken, sock, itGatewayToken, spoolDir), base+"/ready", ln)

	p.start()
	var gen atomic.Int32
	gen.Store(1)
	tally := newCrashTally(total, killAfter)
	start := time.Now()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		tally.run(base, total, clients, &gen, start.Add(40*time.Second))
	}()

	// kill -9 mid-run, as soon as 40% of the requests were accepted
	select {
	case <-tally.reached:
	case <-loadDone:
		t.Fatalf("the load ended before the kill point (%d accepted)", killAfter)
	}
	p.kill()
	killedAt := time.Since(start)
	gen.Store(2)
	p.start()
	restartedAt := time.Since(start)
	<-loadDone
	loadTime := time.Since(start)

	tally.mu.Lock()
	defer tally.mu.Unlock()
	before, after := tally.byGen[1], tally.byGen[2]
	t.Logf("accepted %d before the kill (at %s) and %d after the restart (up at %s); %d attempts got no answer, %d keyless requests given up; load took %s",
		before, killedAt.Round(time.Millisecond), after, restartedAt.Round(time.Millisecond), tally.connErrs, tally.given, loadTime.Round(time.Millisecond))
	if len(tally.runIDs) != total-tally.given || len(tally.statuses) != 0 {
		t.Fatalf("%d of %d requests accepted, %d given up; other answers by status: %v", len(tally.runIDs), total, tally.given, tally.statuses)
	}
	if before == 0 || after == 0 {
		t.Fatalf("the kill did not fall mid-run: %d accepted before, %d after", before, after)
	}
	accepted := make(map[string]bool, total)
	for _, id := range tally.runIDs {
		accepted[id] = true
	}
	if len(accepted) != len(tally.runIDs) {
		t.Fatalf("%d distinct runIds for %d accepted requests", len(accepted), len(tally.runIDs))
	}

	// the spool is in use: the CLI works through the running instance's
	// admin API, and without it refuses politely with status 1
	cli := exec.Command(bin, "hooks", "spool", "list", "--dir", spoolDir, "--address", "unix/"+adminSock)
	cli.Env = p.env()
	var cliOut, cliErr bytes.Buffer
	cli.Stdout, cli.Stderr = &cliOut, &cliErr
	if err := cli.Run(); err != nil || !strings.Contains(cliOut.String(), "spool "+spoolDir+": ") {
		t.Errorf("caddy hooks spool list through the admin API: %v, stdout %q, stderr %q", err, cliOut.String(), cliErr.String())
	}
	noAdmin := "unix/" + filepath.Join(dir, "no-admin.sock")
	cli = exec.Command(bin, "hooks", "spool", "list", "--dir", spoolDir, "--address", noAdmin)
	cli.Env = p.env()
	cliErr.Reset()
	cli.Stderr = &cliErr
	err = cli.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 ||
		!strings.Contains(cliErr.String(), "spool "+spoolDir+" is in use by a running caddyhook, and no hooks handler of a Caddy admin API at "+noAdmin+" uses it") {
		t.Errorf("caddy hooks spool list on a running instance's spool: %v, stderr %q; want exit status 1 and the in-use message", err, cliErr.String())
	}

	// nothing can have been delivered yet: the gateway comes up only now
	m := scrapeSpoolMetrics(t, adminSock)
	if m["caddy_hooks_spool_deliveries_total"] != 0 || m["caddy_hooks_spool_depth"] == 0 {
		t.Fatalf("before the gateway is up: %v", m)
	}
	gw := devgw.New(devgw.Config{Token: itGatewayToken, Record: true})
	gwLn, err := devgw.Listen("unix/" + sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := devgw.Server(gw)
	go func() { _ = srv.Serve(gwLn) }()
	t.Cleanup(func() { _ = srv.Close() })
	gwUp := time.Now()
	// wait for an empty spool: every event was then answered by the
	// gateway (depth counts in-flight events) or dead-lettered
	testkit.Eventually(2*testkit.PollTimeout, func() bool {
		m = scrapeSpoolMetrics(t, adminSock)
		return m["caddy_hooks_spool_depth"] == 0
	})
	drain := time.Since(gwUp)

	delivered := map[string]bool{}
	received := gw.Received()
	for _, r := range received {
		if r.Status == http.StatusOK {
			delivered[r.IdempotencyKey] = true
		}
	}
	lost := 0
	for id := range accepted {
		if !delivered[id] {
			lost++
		}
	}
	// a keyless request stored just before the kill but never answered is
	// delivered all the same: an event no 200 named, at most one per
	// keyless request given up
	unanswered := map[string]bool{}
	for _, r := range received {
		if r.Status != http.StatusOK || accepted[r.IdempotencyKey] {
			continue
		}
		unanswered[r.IdempotencyKey] = true
		var i int
		msg, _ := r.Body["message"].(string)
		if _, rest, ok := strings.Cut(msg, "crash test event "); !ok || func() error { _, err := fmt.Sscan(rest, &i); return err }() != nil || i%2 == 0 {
			t.Errorf("delivered event %s, never answered as a runId, is not a keyless request", r.IdempotencyKey)
		}
	}
	t.Logf("gateway: %d distinct keys (%d never answered as a runId), %d requests (%d duplicates) in %s; metrics %v",
		len(delivered), len(unanswered), len(received), len(received)-len(delivered), drain.Round(time.Millisecond), m)
	if lost != 0 {
		t.Errorf("%d of %d accepted events were never delivered", lost, len(accepted))
	}
	if len(unanswered) > tally.given {
		t.Errorf("%d delivered events were never answered as a runId, more than the %d keyless requests given up", len(unanswered), tally.given)
	}
	if m["caddy_hooks_spool_depth"] != 0 || m["caddy_hooks_spool_retries_total"] == 0 || m["caddy_hooks_spool_dead_letters"] != 0 {
		t.Errorf("after the drain: depth %v, retries %v, dead letters %v; want 0, > 0, 0",
			m["caddy_hooks_spool_depth"], m["caddy_hooks_spool_retries_total"], m["caddy_hooks_spool_dead_letters"])
	}
}
