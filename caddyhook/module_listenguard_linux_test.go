package caddyhook

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// helperListenEnv makes TestHelperReusePortListener the other process of
// TestIntegrationAddressHeldByAnotherProcess.
const helperListenEnv = "CADDYHOOK_TEST_HELPER_LISTEN"

// TestHelperReusePortListener is not a test: run by
// TestIntegrationAddressHeldByAnotherProcess as a separate process, it
// listens on 127.0.0.1 with SO_REUSEPORT (as Caddy does), prints the
// address and holds it until its stdin closes.
func TestHelperReusePortListener(t *testing.T) {
	if os.Getenv(helperListenEnv) == "" {
		t.Skip("helper process of TestIntegrationAddressHeldByAnotherProcess")
	}
	ln, err := reusePortListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fmt.Println(ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
}

// reusePortListen listens with SO_REUSEPORT, as Caddy does.
func reusePortListen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}

// TestIntegrationAddressHeldByAnotherProcess (issue 25 item 3): a config
// whose site address another process already listens on (with
// SO_REUSEPORT, so that Caddy's own bind succeeds) is refused when it
// starts, naming the address and the process; the running config keeps
// serving. Without the guard the config loads and the two processes
// share the address.
func TestIntegrationAddressHeldByAnotherProcess(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReusePortListener$")
	cmd.Env = append(os.Environ(), helperListenEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	held := strings.TrimSpace(line)
	cf := in.caddyfile(hooksSite("http://"+held, itHookToken, in.sock, ""))
	err = in.tryLoad(cf)
	want := fmt.Sprintf("another process already listens on %s (listen address %s of server srv0) by pid %d (", held, held, cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("load on an address another process holds: %v, want it refused with %q", err, want)
	}
	if r := in.post("/hooks/wake", `{"text":"still serving"}`); r.status != 200 {
		t.Fatalf("the running config after the refused one: %d %s", r.status, r.body)
	}
	// the same address once the other process is gone (its sockets are
	// closed when Wait returns): accepted
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	in.load(cf)
	if r := in.post("/hooks/wake", `{"text":"on the freed address"}`); r.status != 200 || in.base != "http://"+held {
		t.Fatalf("on %s: %d %s", in.base, r.status, r.body)
	}
}

// TestSecondInstanceOnOneAddressRefused (issue 25 item 3) runs two caddy
// processes: the first serves a site and its admin endpoint on listeners
// bound with SO_REUSEPORT, as Caddy binds them; a second `caddy run` on
// the same site address, or with the same admin address, refuses to start
// naming the address and the first instance, and the first keeps
// answering every request. `caddy validate` of the same config (the usual
// check before a reload of the running instance) still passes.
func TestSecondInstanceOnOneAddressRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs caddy processes; skipped with -short")
	}
	bin := testkit.CaddyBinary(t)
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken})
	site, err := reusePortListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	admin, err := reusePortListen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	dir := t.TempDir()
	hooks := fmt.Sprintf(`hooks {
		token %s
		gateway unix/%s
		gateway_token %s
	}
	respond "ready" 200`, itHookToken, gw.sock, itGatewayToken)
	first := newCaddyProcess(t, bin, dir, fmt.Sprintf(`{
	admin fd/4
	auto_https off
	persist_config off
}
http://%s {
	bind fd/3
	%s
}
`, site.Addr(), hooks), "http://"+site.Addr().String()+"/ready", site, admin)
	first.start()

	second := func(name, global, siteAddr string) (string, error) {
		cf := filepath.Join(dir, name)
		if err := os.WriteFile(cf, []byte(fmt.Sprintf("{\n\t%s\n\tauto_https off\n\tpersist_config off\n}\nhttp://%s {\n\tbind 127.0.0.1\n\t%s\n}\n",
			global, siteAddr, hooks)), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "run", "--config", cf, "--adapter", "caddyfile")
		cmd.Env = first.env()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct{ name, global, site, addr, label string }{
		{"same-site.Caddyfile", "admin off", site.Addr().String(), site.Addr().String(), "listen address " + site.Addr().String() + " of server srv0"},
		{"same-admin.Caddyfile", "admin " + admin.Addr().String(), "127.0.0.1:0", admin.Addr().String(), "the admin endpoint, or another listener of this Caddy"},
	} {
		out, err := second(tc.name, tc.global, tc.site)
		// the listeners are the test's too (it handed them over)
		where := fmt.Sprintf("another process already listens on %s (%s) by ", tc.addr, tc.label)
		who := fmt.Sprintf("pid %d (%s run --config", first.proc.Pid, bin)
		if err == nil || !strings.Contains(out, where) || !strings.Contains(out, who) {
			t.Fatalf("second instance (%s): %v, want it refused with %q … %q\n%s", tc.name, err, where, who, out)
		}
	}
	validate := exec.Command(bin, "validate", "--config", filepath.Join(dir, "same-site.Caddyfile"), "--adapter", "caddyfile")
	validate.Env = first.env()
	if out, err := validate.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("caddy validate of the same config: %v\n%s", err, out)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 20 {
		resp, err := client.Get("http://" + site.Addr().String() + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ready" {
			t.Fatalf("request %d to the first instance: %d %q", i, resp.StatusCode, body)
		}
	}
}

// TestIntegrationReloadOnFixedAddress: the guard never counts this
// process's own sockets, so reloads on a fixed address (the old config
// still listening there) go through.
func TestIntegrationReloadOnFixedAddress(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	fixed := in.hostPort() // the port the first load got, now written in the config
	cf := in.caddyfile(hooksSite("http://"+fixed, itHookToken, in.sock, ""))
	in.load(cf)
	in.load(strings.Replace(cf, `respond "next handler" 200`, `respond "reloaded" 200`, 1))
	if r := in.do("GET", "/elsewhere", ""); r.body != "reloaded" || in.hostPort() != fixed {
		t.Fatalf("after the reload on %s: %q on %s", fixed, r.body, in.base)
	}
	if r := in.post("/hooks/wake", `{"text":"after two reloads"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
