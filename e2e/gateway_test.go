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

// Gateway process limits. Startup is about 6–13 s on a loaded 2-core
// machine; the bound leaves room for a slow CI host.
const (
	gatewayReadyTimeout = 90 * time.Second
	gatewayStopGrace    = 20 * time.Second
	markerEnv           = "CADDYHOOK_E2E_MARKER" // tags every process the harness starts
)

// openclawGateway is one real gateway process on a loopback port, with a
// throwaway HOME holding its config and state. Stop and Start are the
// mid-test outage helpers: they may be called repeatedly, and a Start after
// a Stop keeps the port, tokens and state.
type openclawGateway struct {
	t          testing.TB
	inst       installation
	home       string // HOME of the gateway; config in home/.openclaw/openclaw.json
	logPath    string // stdout+stderr of every run, appended
	port       int
	hooksToken string // hooks.token: what caddyhook's gateway_token must be
	authToken  string // gateway.auth.token: deliberately different
	marker     string // value of markerEnv for this gateway's processes

	cmd      *exec.Cmd
	exited   chan struct{}
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
	g := &openclawGateway{
		t:          t,
		inst:       inst,
		home:       filepath.Join(dir, "home"),
		logPath:    filepath.Join(dir, "gateway.log"),
		port:       freePort(t),
		hooksToken: randomToken(t),
		authToken:  randomToken(t),
		marker:     randomToken(t),
	}
	if err := write(g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop()
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
	logf, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(g.inst.node, g.inst.openclaw, "gateway", "run",
		"--allow-unconfigured", "--bind", "loopback", "--port", strconv.Itoa(g.port))
	cmd.Dir = g.home
	cmd.Env = []string{
		"HOME=" + g.home,
		"PATH=" + filepath.Dir(g.inst.node) + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"NO_COLOR=1",
		markerEnv + "=" + g.marker,
	}
	cmd.Stdout, cmd.Stderr = logf, logf
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
// and waits until the port refuses connections. It is safe to call twice.
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
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", g.addr(), 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
	g.t.Errorf("gateway port %d still accepts connections after stop", g.port)
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
