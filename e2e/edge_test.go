//go:build openclaw

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// edgeReadyTimeout bounds how long Caddy may take to serve its sites.
const edgeReadyTimeout = 30 * time.Second

// edgeSite is one caddyhook site: its listening socket (held by the test,
// handed to Caddy) and the hooks block that fronts gateway.
type edgeSite struct {
	ln      *net.TCPListener
	gateway string   // host:port of the gateway (or of a tap in front of it)
	extra   []string // additional hooks subdirectives, one per entry
}

// addr is the site's loopback host:port.
func (s edgeSite) addr() string { return s.ln.Addr().String() }

// hooksBlock renders the site's hooks directive.
func (s edgeSite) hooksBlock(edgeToken, gatewayToken string) string {
	lines := []string{
		"path /hooks",
		"token " + edgeToken,
		"gateway " + s.gateway,
		"gateway_token " + gatewayToken,
		"gateway_prefix /hooks",
		"allow_request_session_key true",
		"allowed_session_key_prefixes hook:",
		"allowed_agent_ids main",
		"allowed_models openai/gpt-4o",
	}
	lines = append(lines, s.extra...)
	var b strings.Builder
	b.WriteString("\thooks {\n")
	for _, l := range lines {
		b.WriteString("\t\t" + strings.ReplaceAll(l, "\n", "\n\t\t") + "\n")
	}
	b.WriteString("\t}\n")
	return b.String()
}

// edgeConfig is a Caddyfile with several caddyhook sites sharing tokens.
type edgeConfig struct {
	edgeToken    string // the public hook token callers use
	gatewayToken string // the gateway's hooks.token
	sites        []edgeSite
	admin        string // Caddy's admin endpoint, e.g. unix//path.sock ("" = off)
}

// caddyfile renders the whole Caddyfile: no admin endpoint (unless set), no automatic
// HTTPS, site i served on the loopback socket handed to Caddy as fd 3+i
// (see startEdge), so Caddy binds nothing itself.
func (c edgeConfig) caddyfile() string {
	var b strings.Builder
	admin := "off"
	if c.admin != "" {
		admin = c.admin
	}
	b.WriteString("{\n\tadmin " + admin + "\n\tauto_https off\n\tpersist_config off\n}\n")
	for i, s := range c.sites {
		fmt.Fprintf(&b, "\nhttp://%s {\n\tbind fd/%d\n%s}\n", s.addr(), 3+i, s.hooksBlock(c.edgeToken, c.gatewayToken))
	}
	return b.String()
}

// caddyEnv keeps Caddy's data and config directories inside dir and tags
// the process so the harness can find it.
func caddyEnv(dir, marker string) []string {
	return []string{
		"HOME=" + dir,
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"PATH=/usr/local/bin:/usr/bin:/bin",
		markerEnv + "=" + marker,
	}
}

// caddyEdge is a running `caddy run` process serving an edgeConfig.
type caddyEdge struct {
	t       testing.TB
	cfg     edgeConfig
	logPath string
	marker  string
	cmd     *exec.Cmd
	exited  chan struct{}
	startup time.Duration
}

// startEdge writes cfg, runs Caddy in its own process group and waits
// until every site answers; Caddy is stopped in t.Cleanup.
func startEdge(t testing.TB, bin string, cfg edgeConfig) *caddyEdge {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(cfg.caddyfile()), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &caddyEdge{t: t, cfg: cfg, logPath: filepath.Join(dir, "caddy.log"), marker: randomToken(t)}
	logf, err := os.Create(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = caddyEnv(dir, e.marker)
	cmd.Stdout, cmd.Stderr = logf, logf
	for _, s := range cfg.sites {
		sock, err := s.ln.File() // fd 3+i in the child: `bind fd/N`
		if err != nil {
			t.Fatal(err)
		}
		defer sock.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, sock)
	}
	cmd.SysProcAttr = processGroupAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start caddy: %v", err)
	}
	e.cmd, e.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(e.exited)
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("caddy log tail:\n%s", tailFile(e.logPath, 40))
		}
	})
	if err := e.waitReady(start.Add(edgeReadyTimeout)); err != nil {
		t.Fatalf("caddy not ready: %v\nlog tail:\n%s", err, tailFile(e.logPath, 40))
	}
	e.startup = time.Since(start)
	t.Logf("caddy (caddyhook) ready with %d sites in %v", len(cfg.sites), e.startup.Round(time.Millisecond))
	return e
}

// waitReady polls every site's hooks path with a GET, which caddyhook
// refuses with 405 before looking at any token.
func (e *caddyEdge) waitReady(deadline time.Time) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, s := range e.cfg.sites {
		url := "http://" + s.addr() + "/hooks/wake"
		for {
			select {
			case <-e.exited:
				return fmt.Errorf("caddy exited during startup (%v)", e.cmd.ProcessState)
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusMethodNotAllowed {
					break
				}
				err = fmt.Errorf("GET %s: status %d, want 405", url, resp.StatusCode)
			}
			if time.Now().After(deadline) {
				return err
			}
		}
	}
	return nil
}

// stop ends Caddy (process group, then anything still tagged).
func (e *caddyEdge) stop() {
	if e.cmd == nil {
		return
	}
	stopGroup(e.cmd.Process.Pid, e.exited, 10*time.Second)
	e.cmd = nil
	for _, p := range taggedProcesses(markerEnv + "=" + e.marker) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// client returns a hookClient for site i, sending from sourceIP.
func (e *caddyEdge) client(i int, sourceIP string) *hookClient {
	base := "http://" + e.cfg.sites[i].addr() + "/hooks"
	return newHookClient(base, e.cfg.edgeToken, sourceIP)
}
