package caddyhook

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// browserEnv names the variable that makes a missing browser a failure
// (CI sets it: .ci/run installs Debian's chromium).
const browserEnv = "CADDYHOOK_BROWSER_TESTS"

// findChromium returns the browser to drive, or skips the test when none
// is installed here (unless browserEnv=require).
func findChromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests do not run with -short")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(browserEnv) == "require" {
		t.Fatalf("no chromium on PATH, and %s=require (apt-get install -y chromium)", browserEnv)
	}
	t.Skip("no chromium on PATH: the console's browser tests are skipped (apt-get install -y chromium; CI runs them)")
	return ""
}

// browserWatch records what the page does that it must not: dialogs,
// console errors, exceptions, error log entries, and requests to any URL
// but the console's origin.
type browserWatch struct {
	origin   string
	mu       sync.Mutex
	problems []string
	requests int
}

func (w *browserWatch) add(format string, args ...any) {
	w.mu.Lock()
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// listen is the chromedp listener; it must return fast.
func (w *browserWatch) listen(ev any) {
	switch ev := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		w.add("a %s dialog opened: %q", ev.Type, ev.Message)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			w.add("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		w.add("exception: %s at %s:%d", d.Text, d.URL, d.LineNumber)
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
			w.add("log %s (%s): %s %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		w.mu.Lock()
		w.requests++
		w.mu.Unlock()
		if u := ev.Request.URL; !strings.HasPrefix(u, w.origin+"/") {
			w.add("request to an unexpected URL: %s", u)
		}
	}
}

func (w *browserWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		t.Error(p)
	}
	if w.requests == 0 {
		t.Error("the watch saw no request at all")
	}
}

// The payload of the injection case: markup, an event handler and a
// javascript: link, none of which may run or render.
const hostilePayload = `<script>alert("xss-script")</script><img src=x onerror="alert('xss-img')">` +
	`<a href="javascript:alert('xss-link')">click</a><iframe src="javascript:alert(1)"></iframe>`

// TestConsoleInBrowser drives the console (behind basic_auth, on a site)
// in Debian's chromium: the page loads with no error; hooks sent appear
// within 2 s through the live tail; an event opens and replays (the
// gateway receives it again); a lockout is lifted; a dead letter retried;
// delivery paused and resumed; and a payload, headers and a hook name full
// of markup show as text and run nothing: no dialog, no console error, no
// request to any URL but the console's. Screenshots go to the test's
// artifact directory (go test -artifacts).
func TestConsoleInBrowser(t *testing.T) {
	chromium := findChromium(t)
	in, adm := startOpsIngress(t, ingressOpts{})
	hash, err := bcrypt.GenerateFromPassword([]byte("op-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	spoolDir := t.TempDir()
	in.load(strings.Replace(adm.caddyfile(fmt.Sprintf(`auth_failures 3 1m
		spool %s {
			retry_initial 50ms
			retry_max 100ms
		}
		events {
			bodies on
		}`, spoolDir)), `respond "next handler" 200`, fmt.Sprintf(`handle_path /ops/* {
		basic_auth {
			op %s
		}
		hooks_console
	}
	respond "next handler" 200`, hash), 1))
	origin := in.base
	shots := t.ArtifactDir()

	br := startBrowser(t, chromium, origin, "Basic "+base64.StdEncoding.EncodeToString([]byte("op:op-password")))
	ctx, watch, step, waitJS, count := br.ctx, br.watch, br.step, br.waitJS, browserCount

	// load
	step("load", chromedp.Navigate(origin+"/ops/"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	waitJS("live tail connected", `document.getElementById("live").className === "live on"`, 10*time.Second)

	// hooks appear within 2 s, through the stream (the list is not reloaded)
	for i := range 3 {
		if r := in.post("/hooks/agent", fmt.Sprintf(`{"message":"browser %d","name":"CI"}`, i)); r.status != 200 {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
	}
	waitJS("three events listed", count(`#events tr[data-id]`)+" >= 3", 2*time.Second)
	waitJS("delivered", `[...document.querySelectorAll("#events tr[data-state]")].every(tr => tr.dataset.state === "delivered")`, 10*time.Second)

	// open one and replay it: the gateway receives it again
	sent := func(text string) int {
		n := 0
		for _, r := range in.gw.Received() {
			if strings.Contains(string(r.Raw), text) {
				n++
			}
		}
		return n
	}
	step("open an event", chromedp.Click(chromedp.CSS(`#events tr[data-id]:last-child`)), chromedp.WaitVisible(chromedp.ID("detail")))
	waitJS("detail shows the body", `document.getElementById("d-body").textContent.includes("browser 0")`, 5*time.Second)
	shot(t, ctx, shots, "event-detail")
	step("replay", chromedp.Click(chromedp.ID("replay")))
	waitJS("replay answered", `document.getElementById("replay-result").textContent.startsWith("replayed as ")`, 10*time.Second)
	testkit.WaitForState(t, func() string { return fmt.Sprintf("the gateway got 'browser 0' %d times, want 2", sent("browser 0")) },
		func() bool { return sent("browser 0") == 2 })

	// lift a lockout
	for range 3 {
		in.do(http.MethodPost, "/hooks/wake", `{}`, "Authorization: Bearer wrong-token-000000000000000000000000")
	}
	waitJS("lockout listed", count(`button[data-lift="127.0.0.1"]`)+" === 1", 10*time.Second)
	step("lift", chromedp.Click(chromedp.CSS(`button[data-lift="127.0.0.1"]`)))
	waitJS("lockout lifted", count(`button[data-lift]`)+" === 0", 10*time.Second)
	if r := in.post("/hooks/wake", `{"text":"after the lift"}`); r.status != 200 {
		t.Fatalf("after the lift: %d", r.status)
	}
	testkit.WaitForState(t, func() string { return "the wake after the lift was not delivered" }, func() bool { return sent("after the lift") == 1 })

	// retry a dead letter
	in.gw.FailWith(func(string) int { return http.StatusUnprocessableEntity })
	dead := in.post("/hooks/agent", `{"message":"dead then retried"}`).json(t)["runId"].(string)
	waitJS("dead letter listed", count(fmt.Sprintf(`button[data-retry=%q]`, dead))+" === 1", 10*time.Second)
	shot(t, ctx, shots, "dead-letter")
	in.gw.FailWith(nil)
	step("retry", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-retry=%q]`, dead))))
	testkit.WaitForState(t, func() string { return "the retried dead letter did not reach the gateway" },
		func() bool { return sent("dead then retried") == 1 }) // the forced 422 is not recorded
	adm.waitState(dead, "delivered")
	// The retried row leaves the table when the page next reads the dead
	// letters; the page shrinks and, if it was scrolled, moves. A click
	// aimed before that lands where the button was (CI saw the pause
	// click miss).
	waitJS("retried dead letter gone", count(`button[data-retry]`)+" === 0", 10*time.Second)

	// pause and resume
	step("pause", chromedp.Click(chromedp.ID("pause")))
	waitJS("paused", `document.getElementById("q-state").dataset.paused === "true"`, 10*time.Second)
	if !adm.status("").Spool.Paused {
		t.Fatal("the console's pause did not pause the spool")
	}
	paused := in.post("/hooks/agent", `{"message":"held while paused"}`)
	step("resume", chromedp.Click(chromedp.ID("resume")))
	waitJS("resumed", `document.getElementById("q-state").dataset.paused === "false"`, 10*time.Second)
	if paused.status != 200 {
		t.Fatalf("accept while paused: %d", paused.status)
	}
	testkit.WaitForState(t, func() string { return "the event held while paused was not delivered after resume" },
		func() bool { return sent("held while paused") == 1 })

	// hostile payload, header and hook name: shown as text, nothing runs
	r := in.post("/hooks/agent", `{"message":`+jsonString(hostilePayload)+`,"name":"<b>bold</b>"}`,
		"User-Agent: <img src=x onerror=alert('ua')>", "X-Github-Event: javascript:alert('hdr')")
	if r.status != 200 {
		t.Fatalf("hostile payload: %d %s", r.status, r.body)
	}
	in.do(http.MethodPost, "/hooks/"+`%3Cimg%20src=x%20onerror=alert(7)%3E`, `{}`)
	hostileID := adm.listEvents("status=accepted&limit=1").events[0].ID
	waitJS("hostile event listed", count(fmt.Sprintf(`#events tr[data-id=%q]`, hostileID))+" === 1", 5*time.Second)
	waitJS("hostile row listed", `[...document.querySelectorAll("#events tr[data-rows]")].some(tr => tr.children[2].textContent.includes("<img"))`, 5*time.Second)
	step("open the hostile event", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#events tr[data-id=%q]`, hostileID))))
	waitJS("hostile body shown as text", `document.getElementById("d-body").textContent.includes('<script>alert(') && document.getElementById("d-body").textContent.includes('<img src=x onerror=')`, 5*time.Second)
	waitJS("hostile header shown as text", `[...document.querySelectorAll("#d-headers td")].some(td => td.textContent === "<img src=x onerror=alert('ua')>")`, 5*time.Second)
	for _, sel := range []string{"script", "img", "iframe", "a", "b"} {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](count("main "+sel)))
		if err != nil || n != 0 {
			t.Errorf("the page holds %d <%s> elements (%v): markup from an event was parsed", n, sel, err)
		}
	}
	shot(t, ctx, shots, "hostile-payload")
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`)); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, shots, "console")
	watch.check(t)
	if png := filepath.Join(shots, "console.png"); t.Failed() {
		t.Logf("screenshots in %s", shots)
	} else if dst := os.Getenv("CADDYHOOK_CONSOLE_PNG"); dst != "" {
		// refreshes the README's picture: CADDYHOOK_CONSOLE_PNG=$PWD/docs/console.png
		b, err := os.ReadFile(png)
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// browser is a headless chromium on a fresh profile, with the watch on
// its tab.
type browser struct {
	ctx    context.Context
	watch  *browserWatch
	t      *testing.T
	shots  string
	step   func(name string, actions ...chromedp.Action[chromedp.Void])
	waitJS func(name, expr string, within time.Duration)
}

// startBrowser starts chromium for pages of origin; auth, when set, is
// sent as the Authorization header of every request.
func startBrowser(t *testing.T, chromium, origin, auth string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1100),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{ctx: ctx, watch: &browserWatch{origin: origin}, t: t, shots: t.ArtifactDir()}
	if err := chromedp.Listen(ctx, b.watch.listen); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() { // a dialog would block the page: close it (the watch has noted it)
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	// Every page records where clicks land and what they hit, for a
	// failure's message (a click that missed its button is told apart
	// from a handler that did not act).
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: clickRecorder}); err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": auth}}); err != nil {
			t.Fatal(err)
		}
	}
	b.step = func(name string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		defer scancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			shot(t, ctx, b.shots, "failed-"+name)
			t.Fatalf("%s: %v", name, err)
		}
	}
	b.waitJS = func(name, expr string, within time.Duration) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, within+5*time.Second)
		defer scancel()
		if _, err := chromedp.Run(sctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(within))); err != nil {
			shot(t, ctx, b.shots, "failed-"+name)
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			clicks, _ := chromedp.Run(dctx, chromedp.Evaluate[string](clickReport))
			dcancel()
			t.Fatalf("%s: not true within %s: %s (%v); last clicks and the page's error line: %s", name, within, expr, err, clicks)
		}
	}
	return b
}

// clickRecorder keeps the last clicks of a page: the element hit and
// where; clickReport reads them with the page's error line.
const (
	clickRecorder = `window.__clicks = [];
addEventListener("click", (e) => {
  const t = e.target;
  window.__clicks.push((t.id ? "#" + t.id : t.tagName) + "@" + Math.round(e.clientX) + "," + Math.round(e.clientY) + (e.isTrusted ? "" : " (script)"));
  if (window.__clicks.length > 8) window.__clicks.shift();
}, true);`
	clickReport = `JSON.stringify({clicks: window.__clicks || [], error: (document.getElementById("error") || {}).textContent || ""})`
)

// browserCount is a JS expression counting the elements sel selects.
func browserCount(sel string) string { return fmt.Sprintf("document.querySelectorAll(%q).length", sel) }

// consoleURL is the line `caddy hooks console` prints: the relay's origin
// and its random path.
var consoleURL = regexp.MustCompile(`^hooks console: (http://127\.0\.0\.1:[0-9]+)(/[0-9a-f]{32})/hooks/console/\n$`)

// TestAdminConsoleInBrowser: the admin endpoint's console, opened in
// chromium through the relay of `caddy hooks console`, loads without an
// error, shows a hook within 2 s through the live tail and replays it
// (a POST the relay lets through from the page's own origin).
func TestAdminConsoleInBrowser(t *testing.T) {
	chromium := findChromium(t)
	mods := writeModules(t, t.TempDir(), map[string]string{"null.js": `export default () => null;`})
	in, adm := startOpsIngress(t, ingressOpts{hooks: "events {\n\t\t\tbodies on\n\t\t}\ntransforms_root " + mods + "\n" +
		mappingLines("skip", "match_expr `payload.kind == \"x\"`", `text_template "x"`, "action wake") +
		"mapping null {\n\tmatch_path skip\n\ttransform null.js\n}\n"})
	// the relay, run as `caddy hooks console` runs
	ctx, stop := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := &cobra.Command{Use: "hooks", SilenceUsage: true}
	root.AddCommand(hooksSubcommands()...)
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs([]string{"console", "--listen", "127.0.0.1:0", "--address", "unix/" + adm.sock})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = root.ExecuteContext(ctx)
		_ = pw.Close()
	}()
	t.Cleanup(func() { stop(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := consoleURL.FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("caddy hooks console printed %q (%v)", line, err)
	}
	origin, prefix := m[1], m[2]
	br := startBrowser(t, chromium, origin, "")
	br.step("load", chromedp.Navigate(origin+prefix+"/"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	br.waitJS("live tail connected", `document.getElementById("live").className === "live on"`, 10*time.Second)
	if r := in.post("/hooks/wake", `{"text":"through the relay"}`); r.status != 200 {
		t.Fatalf("accept: %d", r.status)
	}
	br.waitJS("event listed", browserCount(`#events tr[data-id]`)+" === 1", 2*time.Second)
	br.step("open", chromedp.Click(chromedp.CSS(`#events tr[data-id]`)), chromedp.WaitVisible(chromedp.ID("detail")))
	br.step("replay", chromedp.Click(chromedp.ID("replay")))
	br.waitJS("replayed", `document.getElementById("replay-result").textContent.startsWith("replayed as ")`, 10*time.Second)
	testkit.WaitForState(t, func() string { return "the replay did not reach the gateway" }, func() bool { return in.gw.Count("wake") == 2 })
	// a 204 shows its mapping and why it dispatched nothing (issue 31 item 5)
	if r := in.post("/hooks/skip", `{"kind":"y"}`); r.status != http.StatusNoContent {
		t.Fatalf("skip: %d %s", r.status, r.body)
	}
	const skipped = `[...document.querySelectorAll("#events tr[data-id]")].find(tr => tr.children[4].textContent === "skipped")`
	br.waitJS("skip listed with its reason", skipped+`?.children[7].textContent === "mapping null: transform returned null"`, 2*time.Second)
	br.step("open the skip", chromedp.Click(chromedp.CSS(`#events tr[data-id]:first-child`)))
	br.waitJS("skip detail", `document.getElementById("d-meta").textContent.includes("204 mapping null: transform returned null") && `+
		`document.getElementById("d-meta").textContent.includes("(mapping null)")`, 5*time.Second)
	shot(t, br.ctx, br.shots, "skipped")
	shot(t, br.ctx, br.shots, "admin-console")
	br.watch.check(t)
	// the relay passes nothing but /hooks/, from the page's own origin
	for _, c := range []struct {
		method, path string
		hdr          []string
		want         int
	}{
		{"GET", prefix + "/config/", nil, http.StatusNotFound},
		{"GET", "/hooks/console/", nil, http.StatusNotFound},
		{"POST", prefix + "/hooks/spool/pause", nil, http.StatusForbidden},
		{"POST", prefix + "/hooks/spool/pause", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"GET", prefix + "/hooks/events", []string{"Host", "evil.example"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(c.method, origin+c.path, nil)
		for i := 0; i+1 < len(c.hdr); i += 2 {
			if c.hdr[i] == "Host" {
				req.Host = c.hdr[i+1]
			} else {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s %v: %d, want %d", c.method, c.path, c.hdr, resp.StatusCode, c.want)
		}
	}
}

// shot saves a screenshot of the page as dir/name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Error(err)
	}
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string { return string(appendJSONString(nil, s)) }

// TestConsoleShowsClusterRedundancy (issue 34 item 4): with `spool
// cluster` on three NATS servers (replicas 3), the queue panel says that
// every replica is current; once one server stops, it says "degraded"
// and names the queue with two of its three replicas current, while the
// cluster stays up.
func TestConsoleShowsClusterRedundancy(t *testing.T) {
	chromium := findChromium(t)
	nc := natstest.RunCluster(t, 3)
	in, adm := startOpsIngress(t, ingressOpts{})
	hash, err := bcrypt.GenerateFromPassword([]byte("op-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	in.load(strings.Replace(adm.caddyfile(`cluster nats `+strings.Join(nc.URLs(), " ")+` {
			replicas 3
			timeout 2s
			signing_key `+itClusterKey+`
		}
		spool cluster {
			deliver off
			fallback reject
		}`), `respond "next handler" 200`, fmt.Sprintf(`handle_path /ops/* {
		basic_auth {
			op %s
		}
		hooks_console
	}
	respond "next handler" 200`, hash), 1))
	br := startBrowser(t, chromium, in.base, "Basic "+base64.StdEncoding.EncodeToString([]byte("op:op-password")))
	br.step("load", chromedp.Navigate(in.base+"/ops/"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	text := `document.getElementById("q-cluster").textContent`
	br.waitJS("every replica current", text+`.includes("cluster hooks: up; 5 streams, every replica current")`, 20*time.Second)
	nc.Servers[2].Stop()
	br.waitJS("degraded", `document.getElementById("q-cluster").dataset.degraded === "true" && `+
		text+`.startsWith("cluster hooks: up; degraded: ") && `+text+`.includes("HOOKS_hooks_QUEUE 2 of 3 replicas current")`, 30*time.Second)
	shot(t, br.ctx, br.shots, "cluster-degraded")
	br.watch.check(t)
}
