package docs

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/mdexample"
)

// sendsRequest matches a shell block that runs curl.
var sendsRequest = regexp.MustCompile(`(^|[\s;|&(])curl\s`)

// exampleConfig is the config a request example names: Caddyfile.example
// (the file ./dev serves) or a caddyfile block's name=.
const exampleConfig = "Caddyfile.example"

// requestRun is one request directive of a shell block.
type requestRun struct {
	page   string
	block  mdexample.Block
	config string
	want   []int
	stream bool
}

// where names the run in failures.
func (r requestRun) where() string {
	return fmt.Sprintf("%s:%d (config %s)", r.page, r.block.Line, r.config)
}

// parseStatuses reads status=200,401*20,429: a list of codes, n×code.
func parseStatuses(spec string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(spec, ",") {
		code, times, repeated := strings.Cut(part, "*")
		n := 1
		if repeated {
			var err error
			if n, err = strconv.Atoi(times); err != nil || n < 1 {
				return nil, fmt.Errorf("status %q: %q is not a count", spec, part)
			}
		}
		c, err := strconv.Atoi(code)
		if err != nil || c < 100 || c > 599 {
			return nil, fmt.Errorf("status %q: %q is not a status code", spec, code)
		}
		for range n {
			out = append(out, c)
		}
	}
	return out, nil
}

// requestRuns returns every request directive of the pages, and fails the
// test for a shell block that runs curl without one.
func requestRuns(t *testing.T, pages []page) []requestRun {
	t.Helper()
	var out []requestRun
	for _, p := range pages {
		for _, b := range p.blocks {
			if b.Lang != "sh" || b.Has("syntax") || !sendsRequest.MatchString(b.Text) {
				continue
			}
			n := 0
			for _, d := range b.Directives {
				switch d.Name {
				case "request":
				case "recipe":
					n++ // run by TestOpenclawRecipe (e2e, build tag openclaw)
					continue
				default:
					continue
				}
				n++
				r := requestRun{page: p.path, block: b, config: d.Attrs["config"]}
				_, r.stream = d.Attrs["stream"]
				var err error
				if r.want, err = parseStatuses(d.Attrs["status"]); err != nil || r.config == "" {
					t.Errorf("%s:%d: <!-- request config=<config> status=<codes> -->: %v", p.path, d.Line, err)
					continue
				}
				out = append(out, r)
			}
			if n == 0 {
				t.Errorf("%s:%d: a block that sends requests needs <!-- request config=<config> status=<codes> --> before it (see docs/testing.md)", p.path, b.Line)
			}
		}
	}
	return out
}

// TestDocsRequests runs every request example of README.md and docs/*.md
// as written, with bash, against the config it names, running in-process
// with the devgateway behind it, and compares each curl's status with the
// page's. The counts per page are logged.
func TestDocsRequests(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CADDYHOOK_DOC_TESTS") == "require" {
				t.Fatalf("%s is not installed (CADDYHOOK_DOC_TESTS=require)", tool)
			}
			t.Skipf("%s is not installed: the documentation's request examples are not run", tool)
		}
	}
	chdirRoot(t)
	secrets := setSecrets(t)
	pages := readPages(t)
	configs := namedConfigs(t, pages)
	runs := requestRuns(t, pages)
	if len(runs) < 10 {
		t.Fatalf("found %d request examples: the block reader is broken", len(runs))
	}
	w := newWorkspace(t, secrets)
	w.runKeyBlocks(t, pages)
	perPage := map[string][2]int{} // page → blocks, requests
	seen := map[string]bool{}
	for _, r := range runs {
		cf, ok := configs[r.config]
		if !ok {
			t.Errorf("%s: no config named %q (Caddyfile.example, or a caddyfile block's name=)", r.where(), r.config)
			continue
		}
		t.Run(fmt.Sprintf("%s:%d/%s", r.page, r.block.Line, r.config), func(t *testing.T) {
			got := w.run(t, cf, r)
			if !slices.Equal(got, r.want) {
				t.Errorf("%s: statuses %v, the page shows %v\n%s", r.where(), got, r.want, r.block.Text)
			}
		})
		c := perPage[r.page]
		if key := fmt.Sprint(r.page, r.block.Line); !seen[key] {
			seen[key] = true
			c[0]++
		}
		c[1] += len(r.want)
		perPage[r.page] = c
	}
	var rows []string
	var blocks, requests int
	for _, p := range slices.Sorted(maps.Keys(perPage)) {
		rows = append(rows, fmt.Sprintf("%-26s %2d blocks %3d requests", p, perPage[p][0], perPage[p][1]))
		blocks += perPage[p][0]
		requests += perPage[p][1]
	}
	t.Logf("request examples (%d runs):\n%s\n%-26s %2d blocks %3d requests", len(runs), strings.Join(rows, "\n"), "total", blocks, requests)
}

// namedConfigs returns the configs request examples may name: the
// repository's Caddyfile.example and every caddyfile block with a name=
// (a fragment inside its complete config).
func namedConfigs(t *testing.T, pages []page) map[string]string {
	t.Helper()
	b, err := os.ReadFile(exampleConfig)
	must(t, err)
	out := map[string]string{exampleConfig: string(b)}
	for _, c := range caddyfileExamples(t, pages) {
		name, ok := c.block.Attrs["name"]
		if !ok {
			continue
		}
		if _, dup := out[name]; dup || name == "" {
			t.Errorf("%s: name=%q is empty or used twice", c.where(), name)
			continue
		}
		cf, err := c.config()
		if err != nil || c.kind == kindSyntax || c.kind == kindNeeds {
			t.Errorf("%s: a named block must be a config or a fragment (%v)", c.where(), err)
			continue
		}
		out[name] = cf
	}
	return out
}

// workspace is where the blocks run: a directory with .cache/dev.env (as
// ./dev writes it) and the repository's testdata, a curl that sends the
// pages' addresses to the test's server, and the devgateway.
type workspace struct {
	dir       string
	env       []string // the environment of every block
	adminSock string
	gwSock    string
	gw        *devgw.Gateway
}

// curlWrapper is the curl the blocks run: it sends localhost:8080 and
// https://hooks.example.com (as plain HTTP) to the test's server and
// localhost:2019 to its admin socket, bounds the time, and writes each
// status to stderr. It runs the real curl with the user's arguments
// unchanged otherwise.
const curlWrapper = `#!/usr/bin/env bash
args=() admin=
for a in "$@"; do
	case $a in
	https://hooks.example.com*) a=http://${a#https://} ;;
	esac
	case $a in *localhost:2019*) admin=1 ;; esac
	args+=("$a")
done
extra=(--noproxy '*' --max-time "${DOCTEST_MAX_TIME:-20}"
	--connect-to "hooks.example.com:80:127.0.0.1:$DOCTEST_PORT"
	--connect-to "localhost:8080:127.0.0.1:$DOCTEST_PORT")
[ -n "$admin" ] && extra+=(--unix-socket "$DOCTEST_ADMIN")
"$DOCTEST_CURL" "${extra[@]}" "${args[@]}" -w '%{stderr}DOCTEST_STATUS %{http_code}\n'
rc=$?
[ -n "$DOCTEST_STREAM" ] && [ "$rc" = 28 ] && rc=0 # a stream, cut by --max-time
exit $rc
`

// newWorkspace prepares the directory, the environment and the devgateway.
func newWorkspace(t *testing.T, secrets map[string]string) *workspace {
	t.Helper()
	root, err := os.Getwd()
	must(t, err)
	// a short directory: Unix socket paths are limited to 107 bytes
	dir, err := os.MkdirTemp("", "doctest")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &workspace{dir: dir, adminSock: filepath.Join(dir, "admin.sock"), gwSock: filepath.Join(dir, "gw.sock")}
	must(t, os.MkdirAll(filepath.Join(dir, ".cache"), 0o700))
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o700))
	var env strings.Builder
	for _, name := range devSecrets {
		fmt.Fprintf(&env, "export %s=%s\n", name, secrets[name])
	}
	must(t, os.WriteFile(filepath.Join(dir, ".cache", "dev.env"), []byte(env.String()), 0o600))
	must(t, os.Symlink(filepath.Join(root, "testdata"), filepath.Join(dir, "testdata")))
	must(t, os.WriteFile(filepath.Join(dir, "bin", "curl"), []byte(curlWrapper), 0o700))
	realCurl, err := exec.LookPath("curl")
	must(t, err)
	w.env = []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + dir, "LANG=C.UTF-8",
		"DOCTEST_CURL=" + realCurl, "DOCTEST_ADMIN=" + w.adminSock,
		"GATEWAY_SOCKET=" + w.gwSock,
	}
	for name, v := range secrets {
		w.env = append(w.env, name+"="+v)
	}
	t.Setenv("GATEWAY_SOCKET", w.gwSock)

	w.gw = devgw.New(devgw.Config{Token: secrets["GATEWAY_TOKEN"]})
	ln, err := devgw.Listen("unix/" + w.gwSock)
	must(t, err)
	srv := devgw.Server(w.gw)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = caddy.Stop()
		_ = srv.Close()
	})
	return w
}

// keyBlocks are the shell blocks that make a key pair of the reader's
// own to try a public-key provider with (their name= on the page): the
// test runs them to make its keys, so that they are tested as written.
var keyBlocks = []string{"discord-keys", "sendgrid-keys", "pubsub-keys"}

// exported matches the variables a shell block exports.
var exported = regexp.MustCompile(`(?:export|\s)\s*([A-Z][A-Z0-9_]*)=`)

// runKeyBlocks runs the pages' key blocks in the workspace and puts the
// variables each exports in the environment of Caddy and of every block.
func (w *workspace) runKeyBlocks(t *testing.T, pages []page) {
	t.Helper()
	found := map[string]bool{}
	for _, p := range pages {
		for _, b := range p.blocks {
			name := b.Attrs["name"]
			if b.Lang != "sh" || !slices.Contains(keyBlocks, name) {
				continue
			}
			found[name] = true
			var names []string
			for _, line := range strings.Split(b.Text, "\n") {
				if strings.HasPrefix(line, "export ") {
					for _, m := range exported.FindAllStringSubmatch(line, -1) {
						names = append(names, m[1])
					}
				}
			}
			script := b.Text
			for _, n := range names {
				script += fmt.Sprintf("printf '%%s=%%s\\n' %s \"$%s\"\n", n, n)
			}
			cmd := exec.Command("bash", "-e", "-c", script)
			cmd.Dir, cmd.Env = w.dir, w.env
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s:%d (%s): %v\n%s", p.path, b.Line, name, err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				k, v, _ := strings.Cut(line, "=")
				if v == "" {
					t.Fatalf("%s:%d (%s): %s is empty", p.path, b.Line, name, k)
				}
				t.Setenv(k, v)
				w.env = append(w.env, k+"="+v)
			}
		}
	}
	for _, n := range keyBlocks {
		if !found[n] {
			t.Errorf("no sh block named %s: the provider examples' keys are made by it", n)
		}
	}
}

// run loads cf (adapted, then given the test's addresses) and runs the
// block; it returns the statuses the block's curls got, in order.
func (w *workspace) run(t *testing.T, cf string, r requestRun) []int {
	t.Helper()
	adapted, warnings, err := adapt(cf, r.config)
	if err != nil {
		t.Fatalf("%s: config does not adapt: %v (%v)", r.where(), err, warnings)
	}
	cfg, err := w.runnable(t, adapted)
	must(t, err)
	// each run starts from nothing: the lockout table, the idempotency
	// cache and the event log of the previous run are released
	must(t, caddy.Stop())
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("%s: config does not load: %v\n%s", r.where(), err, w.logTail())
	}
	port := listenPort(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", r.block.Text)
	cmd.Dir = w.dir
	cmd.Env = append(slices.Clone(w.env), "DOCTEST_PORT="+port)
	if r.stream {
		cmd.Env = append(cmd.Env, "DOCTEST_STREAM=1", "DOCTEST_MAX_TIME=3")
	}
	var stdout strings.Builder
	stderr, err := cmd.StderrPipe()
	must(t, err)
	cmd.Stdout = &stdout
	must(t, cmd.Start())
	var got []int
	var other strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if code, ok := strings.CutPrefix(sc.Text(), "DOCTEST_STATUS "); ok {
			n, _ := strconv.Atoi(code)
			got = append(got, n)
			continue
		}
		other.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%s: the block failed: %v\nstdout:\n%s\nstderr:\n%s\ncaddy log:\n%s", r.where(), err, stdout.String(), other.String(), w.logTail())
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("stdout:\n%s", stdout.String())
	}
	return got
}

// runnable gives an adapted config the test's addresses: every server
// listens on 127.0.0.1:0 over plain HTTP (a page's hooks.example.com
// included), the admin endpoint on the workspace's socket, every hooks
// handler's gateway is the devgateway, spool and event directories are in
// the workspace, and Caddy logs to a file there.
func (w *workspace) runnable(t *testing.T, adapted []byte) ([]byte, error) {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		return nil, err
	}
	cfg["admin"] = map[string]any{"listen": "unix/" + w.adminSock, "config": map[string]any{"persist": false}}
	cfg["logging"] = map[string]any{"logs": map[string]any{"default": map[string]any{
		"writer": map[string]any{"output": "file", "filename": filepath.Join(w.dir, "caddy.log")}}}}
	apps, _ := cfg["apps"].(map[string]any)
	delete(apps, "tls")
	httpApp, _ := apps["http"].(map[string]any)
	servers, _ := httpApp["servers"].(map[string]any)
	if len(servers) != 1 {
		t.Fatalf("the config has %d servers: a request example's config must have one", len(servers))
	}
	for _, s := range servers {
		srv := s.(map[string]any)
		srv["listen"] = []any{"127.0.0.1:0"}
		srv["automatic_https"] = map[string]any{"disable": true}
		delete(srv, "tls_connection_policies")
	}
	n := 0
	walk(cfg, func(m map[string]any) {
		if m["handler"] != "hooks" {
			return
		}
		n++
		if _, ok := m["gateway"]; ok {
			m["gateway"] = "unix/" + w.gwSock
		}
		if sp, ok := m["spool"].(map[string]any); ok && sp["dir"] != nil {
			sp["dir"] = filepath.Join(w.dir, fmt.Sprintf("spool-%d", time.Now().UnixNano()))
		}
		if ev, ok := m["events"].(map[string]any); ok && ev["dir"] != nil {
			ev["dir"] = filepath.Join(w.dir, fmt.Sprintf("events-%d", time.Now().UnixNano()))
		}
	})
	if n == 0 {
		t.Fatal("the config has no hooks handler")
	}
	return json.Marshal(cfg)
}

// walk calls f on every JSON object of v.
func walk(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, e := range v {
			walk(e, f)
		}
	case []any:
		for _, e := range v {
			walk(e, f)
		}
	}
}

// listenPort is the port the running config's one server listens on.
func listenPort(t *testing.T) string {
	t.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	must(t, err)
	for _, srv := range app.(*caddyhttp.App).Servers {
		for _, ln := range srv.Listeners() {
			_, port, _ := strings.Cut(ln.Addr().String(), "127.0.0.1:")
			return port
		}
	}
	t.Fatal("the config listens nowhere")
	return ""
}

// logTail is the end of Caddy's log, for failures.
func (w *workspace) logTail() string {
	b, _ := os.ReadFile(filepath.Join(w.dir, "caddy.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// randomHex is n random bytes in hex, as ./dev makes its secrets.
func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	must(t, err)
	return hex.EncodeToString(b)
}

// randomBase64 is n random bytes in standard base64.
func randomBase64(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	must(t, err)
	return base64.StdEncoding.EncodeToString(b)
}
