//go:build openclaw

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Gateway process limits. Startup is about 6–13 s on a quiet 2-core
// machine and took over 90 s with seven other test suites running beside
// it; the bound only ends the wait for a gateway that never comes up.
const (
	gatewayReadyTimeout = 5 * time.Minute
	gatewayStopGrace    = 20 * time.Second
	markerEnv           = "CADDYHOOK_E2E_MARKER" // tags every process the harness starts
)

// openclawGateway is one real gateway process on a loopback port, with a
// throwaway HOME holding its config and state. Stop and Start are the
// mid-test outage helpers: they may be called repeatedly, and a Start after
// a Stop keeps the port, tokens and state.
//
// The port is the test's for the whole run: the harness binds 127.0.0.1:0
// and hands the listening socket to every gateway process (fd 3, through
// the preload testdata/listen-fd.cjs, since openclaw cannot be told to use
// an inherited socket). While the gateway is stopped, the harness accepts
// and resets every connection itself, so callers see the gateway as down
// (a reset, answered at once) and no other program can take the port.
type openclawGateway struct {
	t          testing.TB
	inst       installation
	home       string // HOME of the gateway; config in home/.openclaw/openclaw.json
	logPath    string // stdout+stderr of every run, appended
	ln         *net.TCPListener
	port       int
	hooksToken string // hooks.token: what caddyhook's gateway_token must be
	authToken  string // gateway.auth.token: deliberately different
	marker     string // value of markerEnv for this gateway's processes

	cmd      *exec.Cmd
	exited   chan struct{}
	refusing chan struct{} // closed when the refuser (see refuse) has stopped; nil while the gateway runs
	startups []time.Duration
}

// newOpenclawGateway writes the throwaway config and starts the gateway; it
// is stopped (process group, then any tagged stragglers) in t.Cleanup.
func newOpenclawGateway(t testing.TB, inst installation) *openclawGateway {
	t.Helper()
	return newOpenclawGatewayWith(t, inst, nil)
}

// newOpenclawGatewayWith is newOpenclawGateway with the config written by
// write (nil: writeConfig, the harness's own config) once the port and
// tokens are chosen.
func newOpenclawGatewayWith(t testing.TB, inst installation, write func(g *openclawGateway) error) *openclawGateway {
	t.Helper()
	if write == nil {
		write = (*openclawGateway).writeConfig
	}
	dir := t.TempDir()
	ln := listenLoopback(t)
	g := &openclawGateway{
		t:          t,
		inst:       inst,
		home:       filepath.Join(dir, "home"),
		logPath:    filepath.Join(dir, "gateway.log"),
		ln:         ln,
		port:       ln.Addr().(*net.TCPAddr).Port,
		hooksToken: randomToken(t),
		authToken:  randomToken(t),
		marker:     randomToken(t),
	}
	if err := write(g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop()
		g.stopRefusing()
		if t.Failed() {
			t.Logf("gateway log tail:\n%s", tailFile(g.logPath, 60))
		}
	})
	g.Start(t)
	return g
}

// config is the gateway's openclaw.json: hooks on with their own token, the
// gateway auth token different, request session keys allowed under hook:,
// the gmail preset, loopback bind, logs inside the temp dir.
func (g *openclawGateway) config() map[string]any {
	return map[string]any{
		"gateway": map[string]any{
			"mode": "local",
			"bind": "loopback",
			"port": g.port,
			"auth": map[string]any{"mode": "token", "token": g.authToken},
		},
		"hooks": map[string]any{
			"enabled":                   true,
			"token":                     g.hooksToken,
			"path":                      "/hooks",
			"allowRequestSessionKey":    true,
			"allowedSessionKeyPrefixes": []string{"hook:"},
			"allowedAgentIds":           []string{"main"},
			"presets":                   []string{"gmail"},
		},
		"logging": map[string]any{"file": g.fileLogPath()},
	}
}

// writeConfig writes config() where openclaw reads it ($HOME/.openclaw/openclaw.json).
func (g *openclawGateway) writeConfig() error {
	data, err := json.MarshalIndent(g.config(), "", "  ")
	if err != nil {
		return err
	}
	return g.writeConfigFile(data)
}

// configPath is where openclaw reads its config.
func (g *openclawGateway) configPath() string {
	return filepath.Join(g.home, ".openclaw", "openclaw.json")
}

// writeConfigFile writes data (JSON5) as the gateway's config.
func (g *openclawGateway) writeConfigFile(data []byte) error {
	if err := os.MkdirAll(filepath.Dir(g.configPath()), 0o700); err != nil {
		return err
	}
	return os.WriteFile(g.configPath(), data, 0o600)
}

// fileLogPath is the gateway's JSON-lines file log (logging.file).
func (g *openclawGateway) fileLogPath() string {
	return filepath.Join(filepath.Dir(g.logPath), "openclaw-file.log")
}

// baseURL is the gateway's HTTP root.
func (g *openclawGateway) baseURL() string { return "http://" + g.addr() }

// addr is the gateway's loopback host:port.
func (g *openclawGateway) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(g.port)) }

// Start runs `openclaw gateway run` in its own process group and waits for
// readiness: /readyz reports ready and the hooks handler answers a GET with
// 405 (a GET is refused before the token check, so probing never counts as
// an authentication failure). Failures are reported to t, the calling test.
func (g *openclawGateway) Start(t testing.TB) {
	t.Helper()
	if g.cmd != nil {
		t.Fatal("gateway already running")
	}
	g.stopRefusing()
	logf, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sock, err := g.ln.File() // a duplicate of the listening socket for the child
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cmd := exec.Command(g.inst.node, "--require", filepath.Join(repoRoot(t), "e2e", "testdata", "listen-fd.cjs"),
		g.inst.openclaw, "gateway", "run", "--allow-unconfigured", "--bind", "loopback", "--port", strconv.Itoa(g.port))
	cmd.Dir = g.home
	cmd.Env = []string{
		"HOME=" + g.home,
		"PATH=" + filepath.Dir(g.inst.node) + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"NO_COLOR=1",
		"CADDYHOOK_E2E_LISTEN_FD=3",
		"CADDYHOOK_E2E_LISTEN_PORT=" + strconv.Itoa(g.port),
		markerEnv + "=" + g.marker,
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{sock}
	cmd.SysProcAttr = processGroupAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start gateway: %v", err)
	}
	g.cmd, g.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(g.exited)

	if err := g.waitReady(start.Add(gatewayReadyTimeout)); err != nil {
		g.Stop()
		t.Fatalf("gateway not ready: %v\nlog tail:\n%s", err, tailFile(g.logPath, 40))
	}
	g.startups = append(g.startups, time.Since(start))
	t.Logf("openclaw gateway ready on %s in %v (pid %d)", g.addr(), time.Since(start).Round(time.Millisecond), cmd.Process.Pid)
}

// waitReady polls until the gateway serves hooks or the deadline passes.
func (g *openclawGateway) waitReady(deadline time.Time) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			return fmt.Errorf("gateway exited during startup (%v)", g.cmd.ProcessState)
		case <-time.After(200 * time.Millisecond):
		}
		if last = probeReady(client, g.baseURL()); last == nil {
			return nil
		}
	}
	return fmt.Errorf("timed out after %v: %v", gatewayReadyTimeout, last)
}

// probeReady checks /readyz and the hooks handler once.
func probeReady(client *http.Client, base string) error {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return err
	}
	var ready struct {
		Ready bool `json:"ready"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || !ready.Ready {
		return fmt.Errorf("/readyz: status %d ready=%v (%v)", resp.StatusCode, ready.Ready, err)
	}
	resp, err = client.Get(base + "/hooks/wake")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("GET /hooks/wake: status %d, want 405", resp.StatusCode)
	}
	return nil
}

// Stop sends SIGTERM to the gateway's process group, escalates to SIGKILL
// after a grace period, then ends any process still tagged with this
// gateway's marker (the gateway starts a helper in its own process group),
// and from then on resets every connection to the port (see refuse). It is
// safe to call twice.
func (g *openclawGateway) Stop() {
	if g.cmd == nil {
		return
	}
	pid := g.cmd.Process.Pid
	stopGroup(pid, g.exited, gatewayStopGrace)
	g.cmd = nil
	for _, p := range taggedProcesses(markerEnv + "=" + g.marker) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	g.refuse()
}

// refuse accepts every connection to the stopped gateway's port and resets
// it at once (SO_LINGER 0): a caller sees what a closed port gives it, a
// connection error without delay, while the socket stays the test's.
func (g *openclawGateway) refuse() {
	done := make(chan struct{})
	g.refusing = done
	_ = g.ln.SetDeadline(time.Time{})
	go func() {
		defer close(done)
		for {
			c, err := g.ln.AcceptTCP()
			if err != nil {
				return // the deadline stopRefusing set, or the socket closed
			}
			_ = c.SetLinger(0)
			_ = c.Close()
		}
	}()
}

// stopRefusing ends refuse, leaving connections queued for the next
// gateway process.
func (g *openclawGateway) stopRefusing() {
	if g.refusing == nil {
		return
	}
	_ = g.ln.SetDeadline(time.Now()) // wakes the blocked Accept
	<-g.refusing
	g.refusing = nil
	_ = g.ln.SetDeadline(time.Time{})
}

// processGroupAttr puts a child in its own process group, and asks the
// kernel to terminate it if the test process dies first (a timed-out or
// killed `go test` must not leave servers behind).
func processGroupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// stopGroup terminates the process group led by pid: SIGTERM, then SIGKILL
// when exited has not closed within grace.
func stopGroup(pid int, exited <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	// Children that outlive the leader are still in the group.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// taggedProcesses lists the PIDs whose environment contains tag (an exact
// NAME=value entry). Only processes this harness started carry its tag.
func taggedProcesses(tag string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == tag {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// listenLoopback returns a listening socket on 127.0.0.1 at a port the
// kernel picks; it is closed when the test ends. The harness hands such
// sockets to the processes it starts, so every port in the tests is owned
// by the test from start to end.
func listenLoopback(t testing.TB) *net.TCPListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// randomToken returns 32 random bytes as hex (64 characters).
func randomToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// tailFile returns the last n lines of a log file, for failure reports.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
