//go:build openclaw

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/mdexample"
)

// The recipe's fixed addresses, the only text TestOpenclawRecipe replaces
// (see docs/testing.md, "The openclaw recipe").
const (
	recipeGatewayPort = "18789"          // the gateway's port, in its config and on its command line
	recipeEdgeSite    = "http://:8088"   // HOOKS_SITE, the edge's site
	recipeEdgeAddr    = "localhost:8088" // where step 5 sends its request
	recipeAdmin       = "localhost:2020" // CADDY_ADMIN, the edge's admin endpoint
	recipeSteps       = 5
)

// stepTimeout bounds each step (step 1 may install Node and openclaw,
// step 3 compiles Caddy, step 2 waits for the gateway to be ready).
var stepTimeout = map[int]time.Duration{1: 15 * time.Minute, 2: 6 * time.Minute, 3: 15 * time.Minute, 4: 2 * time.Minute, 5: 4 * time.Minute}

// readRecipe returns the text of the recipe's steps in a page: the shell
// blocks after <!-- recipe step=N -->, in order.
func readRecipe(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, blk := range mdexample.Blocks(string(b)) {
		for _, d := range blk.Directives {
			if d.Name != "recipe" {
				continue
			}
			if n, _ := strconv.Atoi(d.Attrs["step"]); n != len(steps)+1 || blk.Lang != "sh" {
				t.Fatalf("%s:%d: recipe step=%s, want step=%d on a sh block", path, blk.Line, d.Attrs["step"], len(steps)+1)
			}
			steps = append(steps, blk.Text)
		}
	}
	if len(steps) != recipeSteps {
		t.Fatalf("%s: %d recipe steps, want %d", path, len(steps), recipeSteps)
	}
	return steps
}

// runIDReply matches the edge's answer to the agent run.
var runIDReply = regexp.MustCompile(`"runId":"([0-9a-f-]{36})"`)

// TestOpenclawRecipe runs the openclaw recipe of README.md (the same text
// as docs/openclaw.md's steps) as written, in one bash session, as on a
// fresh machine: HOME is a scratch directory (so step 2 writes a fresh
// ~/.openclaw/openclaw.json; the install cache is linked into it, so
// step 1 reuses it), the working directory a scratch copy of the clone
// (its files linked). Only the recipe's fixed addresses are replaced: the
// gateway's port with one the test holds and hands to the gateway (fd 3,
// through testdata/listen-fd.cjs), the edge's site with port 0 (the test
// reads the port the edge got from /proc before step 5), its admin
// endpoint with a Unix socket. The edge must answer the agent run with a
// runId, and the gateway's log must then have that run.
func TestOpenclawRecipe(t *testing.T) {
	root := repoRoot(t)
	steps := readRecipe(t, filepath.Join(root, "README.md"))
	if doc := readRecipe(t, filepath.Join(root, "docs", "openclaw.md")); !slices.Equal(doc, steps) {
		t.Fatalf("the recipe in README.md and docs/openclaw.md differ:\nREADME:\n%s\ndocs/openclaw.md:\n%s", strings.Join(steps, "\n"), strings.Join(doc, "\n"))
	}

	// a short scratch directory: Unix socket paths are limited to 107 bytes
	scratch, err := os.MkdirTemp("", "recipe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	home, clone, tmp := filepath.Join(scratch, "home"), filepath.Join(scratch, "clone"), filepath.Join(scratch, "tmp")
	for _, d := range []string{filepath.Join(home, ".cache"), clone, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cache := os.Getenv("CADDYHOOK_E2E_CACHE")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache", "caddyhook-e2e")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	mustLink(t, cache, filepath.Join(home, ".cache", "caddyhook-e2e"))
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); n != ".git" && n != ".cache" && n != "Caddyfile" && n != "caddy" && n != "gateway.log" {
			mustLink(t, filepath.Join(root, n), filepath.Join(clone, n))
		}
	}

	gwListener := listenLoopback(t)
	gwPort := strconv.Itoa(gwListener.Addr().(*net.TCPAddr).Port)
	sock, err := gwListener.File()
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	adminSock := filepath.Join(scratch, "admin.sock")
	marker := randomToken(t)
	replace := strings.NewReplacer(
		recipeGatewayPort, gwPort,
		recipeEdgeSite, "http://127.0.0.1:0",
		recipeAdmin, "unix/"+adminSock,
	)

	env := []string{
		"HOME=" + home, "TMPDIR=" + tmp, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "NO_COLOR=1",
		"NODE_OPTIONS=--require " + filepath.Join(root, "e2e", "testdata", "listen-fd.cjs"),
		"CADDYHOOK_E2E_LISTEN_FD=3", "CADDYHOOK_E2E_LISTEN_PORT=" + gwPort,
		markerEnv + "=" + marker,
	}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN", "GONOSUMDB", "GOPRIVATE", "GONOPROXY"} {
		if v := goEnv(t, k); v != "" {
			env = append(env, k+"="+v)
		}
	}

	sh := newSession(t, clone, env, sock)
	t.Cleanup(func() {
		sh.stop()
		for _, p := range taggedProcesses(markerEnv + "=" + marker) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("gateway.log tail:\n%s", tailFile(filepath.Join(clone, "gateway.log"), 40))
		}
	})

	var out string
	for i, step := range steps {
		n := i + 1
		text := replace.Replace(step)
		if n == 5 {
			text = strings.ReplaceAll(text, recipeEdgeAddr, "127.0.0.1:"+edgePort(t, marker, gwPort))
		}
		start := time.Now()
		out = sh.run(t, n, text, stepTimeout[n])
		t.Logf("step %d (%v):\n%s", n, time.Since(start).Round(100*time.Millisecond), out)
	}
	m := runIDReply.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("step 5: the edge did not answer with a runId:\n%s", out)
	}
	if want := "hook agent run completed runId=" + m[1]; !strings.Contains(out, want) {
		t.Fatalf("step 5: the gateway's log has no %q:\n%s", want, out)
	}
	t.Logf("agent run %s went through the edge and is in the gateway's log", m[1])
}

// mustLink makes link a symbolic link to target.
func mustLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// goEnv is one `go env` value.
func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// edgePort finds the port the recipe's edge listens on: a TCP socket
// listening in a caddy process the recipe started (tagged with marker),
// other than the gateway's (which every process of the session
// inherited).
func edgePort(t *testing.T, marker, gwPort string) string {
	t.Helper()
	listening := listeningPorts(t)
	for _, pid := range taggedProcesses(markerEnv + "=" + marker) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) < 2 || filepath.Base(args[0]) != "caddy" || args[1] != "run" {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
				if port, ok := listening[strings.TrimSuffix(inode, "]")]; ok && port != gwPort {
					return port
				}
			}
		}
	}
	t.Fatal("the recipe's edge (caddy run) listens on no TCP port")
	return ""
}

// listeningPorts maps the inodes of the listening TCP sockets (IPv4 and
// IPv6) to their ports, from /proc/net/tcp{,6}.
func listeningPorts(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err == nil {
				out[fields[9]] = strconv.FormatUint(port, 10)
			}
		}
	}
	return out
}

// session is one bash process the recipe's steps are written to, as a
// person types them into one terminal.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	exited chan struct{}
}

// stepDone ends the output of a step, with its exit status.
const stepDone = "__RECIPE_STEP_DONE__"

// newSession starts `bash -e` reading the steps from its standard input,
// in dir, with env and the gateway's listening socket as fd 3.
func newSession(t *testing.T, dir string, env []string, gwSocket *os.File) *session {
	t.Helper()
	cmd := exec.Command("bash", "-e", "-s")
	cmd.Dir, cmd.Env = dir, env
	cmd.ExtraFiles = []*os.File{gwSocket}
	cmd.SysProcAttr = processGroupAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := &session{cmd: cmd, stdin: stdin, lines: make(chan string, 1024), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		r.Close()
	}()
	go func() { _ = cmd.Wait(); close(s.exited) }()
	return s
}

// run writes one step and returns its output, failing the test when the
// step fails (bash -e ends the session) or takes longer than timeout.
func (s *session) run(t *testing.T, n int, text string, timeout time.Duration) string {
	t.Helper()
	if _, err := fmt.Fprintf(s.stdin, "%s\necho %s $?\n", text, stepDone); err != nil {
		t.Fatalf("step %d: the session is gone: %v", n, err)
	}
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				<-s.exited
				t.Fatalf("step %d failed (%v):\n%s\n%s", n, s.cmd.ProcessState, text, out.String())
			}
			if strings.HasPrefix(line, stepDone+" ") {
				return out.String()
			}
			out.WriteString(line + "\n")
		case <-deadline:
			t.Fatalf("step %d took longer than %v:\n%s\n%s", n, timeout, text, out.String())
		}
	}
}

// stop ends the session and every process in its group.
func (s *session) stop() {
	s.stdin.Close()
	stopGroup(s.cmd.Process.Pid, s.exited, 5*time.Second)
}
