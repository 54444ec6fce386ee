package caddyhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// nodeName is the cluster node name of a running process (its admin
// API's status).
func (p *clusterProcess) nodeName(t *testing.T) string {
	t.Helper()
	ac, err := adminapi.NewClient("unix/" + p.admin)
	if err != nil {
		t.Fatal(err)
	}
	var hs []adminapi.HandlerStatus
	if err := ac.Do(http.MethodGet, adminapi.Prefix, nil, &hs); err != nil || len(hs) != 1 || hs[0].Cluster == nil {
		t.Fatalf("the status of %s: %v %+v", p.admin, err, hs)
	}
	return hs[0].Cluster.Node
}

// lineWatch keeps the lines a process prints.
type lineWatch struct {
	mu    sync.Mutex
	lines []string
}

func (w *lineWatch) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		w.mu.Lock()
		w.lines = append(w.lines, sc.Text())
		w.mu.Unlock()
	}
}

// has reports whether a line holds every one of parts.
func (w *lineWatch) has(parts ...string) bool {
	return w.hasSince(0, parts...)
}

// count is how many lines were read so far.
func (w *lineWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lines)
}

// hasSince reports whether a line after the first from holds every one
// of parts.
func (w *lineWatch) hasSince(from int, parts ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines[from:] {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// TestClusterConsoleInBrowser (issue 32, acceptance): a cluster of three
// caddy processes on one NATS server, two edges (the first with the
// console behind basic_auth) and a delivery node next to the gateway.
// In chromium, on the first edge's console: the events accepted on both
// edges are listed with their node; the delivery node is delivering;
// frozen (SIGSTOP) with events queued, it is "stalled" within ack_wait
// and a few seconds and delivery is not said to run; after SIGCONT it
// delivers again. A dead letter that expired after failed attempts shows
// its last error in the list, the dead letters and the detail; drop asks
// for confirmation, with the count for drop all, and the drop is an
// operator's action with the console's user. `caddy hooks tail
// --cluster` (the binary) prints the events of both edges, and when the
// second edge is killed, a line naming it, then goes on; a tail of the
// killed edge alone gives up naming its endpoint, with status 1; when the
// first edge restarts, the cluster tail says so, reconnects, says it is
// back, and prints the restarted node's events. Screenshots go
// to the test's artifact directory, and with CADDYHOOK_CLUSTER_PNG=<file>
// the console's to that file (docs/console-cluster.png).
func TestClusterConsoleInBrowser(t *testing.T) {
	chromium := findChromium(t)
	bin := testkit.CaddyBinary(t)
	nats := natstest.Run(t, natstest.Options{})
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	hash, err := bcrypt.GenerateFromPassword([]byte("op-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cl := `cluster nats ` + nats.URL() + ` {
			timeout 1s
			ack_wait 5s
			signing_key ` + itClusterKey + `
		}
		events {
			bodies on
		}`
	edge := cl + `
		spool cluster {
			deliver off
			fallback reject
		}`
	console := fmt.Sprintf(`handle_path /ops/* {
		basic_auth {
			op %s
		}
		hooks_console
	}`, hash)
	e1 := startClusterProcessSite(t, bin, "e1", edge, console)
	e2 := startClusterProcess(t, bin, "e2", edge)
	d1 := startClusterProcess(t, bin, "d1", "gateway unix/"+gw.sock+"\n"+cl+`
		spool cluster {
			fallback reject
			retry_initial 200ms
			retry_max 400ms
			max_age 3s
		}`)
	n1, n2, nd := e1.nodeName(t), e2.nodeName(t), d1.nodeName(t)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(p *clusterProcess, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+itHookToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s%s: %d %s", p.base, path, resp.StatusCode, b)
		}
		return string(b)
	}
	runID := func(reply string) string {
		_, rest, _ := strings.Cut(reply, `"runId":"`)
		id, _, _ := strings.Cut(rest, `"`)
		return id
	}

	// the cluster tail, as an operator runs it
	tail := exec.Command(bin, "hooks", "tail", "--cluster", "--address", "unix/"+e1.admin)
	tail.Env = e1.env()
	var tailOut, tailErr lineWatch
	stdout, _ := tail.StdoutPipe()
	stderr, _ := tail.StderrPipe()
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tail.Process.Kill(); _ = tail.Wait() })
	go tailOut.read(stdout)
	go tailErr.read(stderr)
	// a tail of the second edge alone, which gives up soon after it is killed
	tail2 := exec.Command(bin, "hooks", "tail", "--address", "unix/"+e2.admin, "--reconnect", "2s")
	tail2.Env = e2.env()
	var tail2Err bytes.Buffer
	tail2.Stderr = &tail2Err
	if err := tail2.Start(); err != nil {
		t.Fatal(err)
	}
	tail2Done := make(chan error, 1)
	go func() { tail2Done <- tail2.Wait() }()
	t.Cleanup(func() { _ = tail2.Process.Kill() })

	br := startBrowser(t, chromium, e1.base, "Basic "+base64.StdEncoding.EncodeToString([]byte("op:op-password")))
	ctx, step, waitJS, count := br.ctx, br.step, br.waitJS, browserCount
	t.Cleanup(func() { // what a failure needs told: the rows, the gateway, each node's log
		if !t.Failed() {
			return
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, err := chromedp.Run(dctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll("#events tr[data-id]")].map(tr => [tr.dataset.id, tr.children[1].textContent, tr.dataset.state]))`))
		cancel()
		t.Logf("the console's rows (id, node, state): %s %v", rows, err)
		for _, r := range gw.Received() {
			t.Logf("the gateway got %s %d at %s: %s", r.Kind, r.Status, r.Time.Format(time.StampMicro), r.Raw)
		}
		for _, p := range []*clusterProcess{e1, e2, d1} {
			var page map[string]any
			ac, err := adminapi.NewClient("unix/" + p.admin)
			if err == nil {
				err = ac.Do(http.MethodGet, adminapi.Prefix+"events?path=/hooks&limit=20", nil, &page)
			}
			t.Logf("the log of %s: %v %v\n%s", p.admin, page["entries"], err, p.tail(p.runs))
		}
	})
	step("load", chromedp.Navigate(e1.base+"/ops/"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	waitJS("live tail connected", `document.getElementById("live").className === "live on"`, 10*time.Second)
	waitJS("the every-node view", `!document.getElementById("scope-label").hidden && document.getElementById("scope").value === "cluster"`, 5*time.Second)
	waitJS("3 of 3 nodes", `document.getElementById("nodes").textContent === "3 of 3 nodes"`, 15*time.Second)

	// events accepted on both edges, in one console, with their node
	var ids []string
	for i, p := range []*clusterProcess{e1, e2, e1, e2} {
		ids = append(ids, runID(post(p, "/hooks/agent", fmt.Sprintf(`{"message":"from edge %d","name":"CI"}`, i%2+1))))
	}
	for i, id := range ids {
		node := []string{n1, n2}[i%2]
		waitJS("event "+id+" listed with its node", fmt.Sprintf(`[...document.querySelectorAll(%q)].some(tr => tr.children[1].textContent === %q)`, fmt.Sprintf(`#events tr[data-id=%q]`, id), node), 10*time.Second)
	}
	waitJS("delivered", fmt.Sprintf(`[...document.querySelectorAll("#events tr[data-state]")].filter(tr => %q.includes(tr.dataset.id) && tr.dataset.state === "delivered").length === 4`, strings.Join(ids, " ")), 15*time.Second)
	waitJS("the delivery node delivering", fmt.Sprintf(`["delivering","idle"].includes((document.querySelector(%q) || {dataset: {}}).dataset.state)`, fmt.Sprintf(`#q-nodes tr[data-node=%q]`, nd)), 10*time.Second)
	waitJS("delivery running", `document.getElementById("q-summary").dataset.state === "running"`, 5*time.Second)
	shot(t, ctx, br.shots, "cluster-events")

	// the tail printed the events of both edges, each with its node
	for _, node := range []string{n1, n2} {
		testkit.WaitForState(t, func() string { return fmt.Sprintf("the tail's lines of node %s:\n%s", node, tailOut.String()) },
			func() bool { return tailOut.has(node, "agent") })
	}

	// a dead letter that expired after failed attempts keeps its cause
	gw.FailWith(func(kind string) int {
		if kind == "wake" {
			return http.StatusBadGateway
		}
		return 0
	})
	post(e2, "/hooks/wake", `{"text":"doomed"}`)
	waitJS("the dead letter with its cause", `[...document.querySelectorAll("#dead tr")].some(tr => tr.children[3].textContent.startsWith("expired after ") && tr.children[3].textContent.includes("; last: gateway status 502"))`, 20*time.Second)
	gw.FailWith(nil)
	waitJS("the dead event's row with its cause", `[...document.querySelectorAll("#events tr[data-state=dead]")].some(tr => tr.children[7].textContent.includes("last: gateway status 502") && tr.children[3].className === "sdead")`, 10*time.Second)
	step("open the dead event", chromedp.Click(chromedp.CSS(`#events tr[data-state=dead]`)), chromedp.WaitVisible(chromedp.ID("detail")))
	waitJS("the detail's cause", `[...document.querySelectorAll("#d-dispatch td")].some(td => td.textContent.includes("last: gateway status 502")) && document.getElementById("d-meta").textContent.includes("last: gateway status 502")`, 10*time.Second)
	shot(t, ctx, br.shots, "cluster-dead-letter")

	// drop all asks first, with the count; cancelled, nothing is dropped
	step("drop all", chromedp.Click(chromedp.ID("drop-all")))
	waitJS("drop all asks with the count", `!document.getElementById("confirm").hidden && document.getElementById("confirm-text").textContent.startsWith("Drop all 1 dead letter?")`, 5*time.Second)
	shot(t, ctx, br.shots, "cluster-confirm")
	step("cancel", chromedp.Click(chromedp.ID("confirm-no")))
	waitJS("nothing dropped", `document.getElementById("confirm").hidden && `+count(`#dead tr`)+` === 1`, 5*time.Second)
	step("drop one", chromedp.Click(chromedp.CSS(`#dead button[data-drop]`)))
	waitJS("drop asks", `!document.getElementById("confirm").hidden && document.getElementById("confirm-text").textContent.startsWith("Drop the dead letter ")`, 5*time.Second)
	step("confirm", chromedp.Click(chromedp.ID("confirm-yes")))
	waitJS("dropped", count(`#dead tr`)+` === 0`, 10*time.Second)
	waitJS("the drop recorded with the user", `[...document.querySelectorAll("#events tr[data-operator=drop]")].some(tr => tr.textContent.includes("user op"))`, 10*time.Second)

	// the delivery node frozen: stalled within ack_wait and a few seconds
	if err := d1.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	// (the signal is asynchronous: one thread takes it and stops the
	// others, which run on until then; the process is stopped once every
	// thread's state in /proc is "stopped")
	stopped := func() (bool, string) {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", d1.proc.Pid))
		var states []string
		all := len(tasks) > 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			_, rest, _ := strings.Cut(string(b), ") ")
			st, _, _ := strings.Cut(rest, " ")
			states = append(states, st)
			all = all && err == nil && (st == "T" || st == "t")
		}
		return all, strings.Join(states, "")
	}
	testkit.WaitForState(t, func() string { _, s := stopped(); return "every thread of the delivery node stopped: " + s },
		func() bool { ok, _ := stopped(); return ok })
	t.Logf("stopped %s after SIGSTOP", time.Since(frozen))
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = d1.proc.Signal(syscall.SIGCONT)
		}
	}
	defer thaw()
	for i := range 2 {
		post(e1, "/hooks/agent", fmt.Sprintf(`{"message":"while frozen %d"}`, i))
	}
	waitJS("the delivery node stalled", fmt.Sprintf(`(document.querySelector(%q) || {dataset: {}}).dataset.state === "stalled"`, fmt.Sprintf(`#q-nodes tr[data-node=%q]`, nd)), 5*time.Second+15*time.Second)
	waitJS("delivery not said to run", `document.getElementById("q-summary").dataset.state === "stalled"`, 5*time.Second)
	t.Logf("stalled %s after SIGSTOP (ack_wait 5s)", time.Since(frozen).Round(100*time.Millisecond))
	shot(t, ctx, br.shots, "cluster-stalled")
	thaw()
	waitJS("the delivery node back", fmt.Sprintf(`["delivering","idle"].includes((document.querySelector(%q) || {dataset: {}}).dataset.state)`, fmt.Sprintf(`#q-nodes tr[data-node=%q]`, nd)), 30*time.Second)
	waitJS("delivery running again", `document.getElementById("q-summary").dataset.state === "running"`, 10*time.Second)

	// the second edge killed: the tail names it and goes on
	e2.kill()
	testkit.WaitForState(t, func() string { return fmt.Sprintf("a tail line naming %s:\n%s", n2, tailOut.String()) },
		func() bool { return tailOut.has("(cluster: 2 of 3 nodes answer", "node "+n2) })
	// (a spooled event's line shows the gateway's run id once delivered,
	// not the id its 200 gave: the event is the first line after the post)
	mark := tailOut.count()
	post(e1, "/hooks/agent", `{"message":"after the kill"}`)
	testkit.WaitForState(t, func() string { return fmt.Sprintf("the tail goes on (after line %d):\n%s", mark, tailOut.String()) },
		func() bool { return tailOut.hasSince(mark, n1, " agent ") })
	// the second edge's own tail gave up, naming its endpoint, status 1
	select {
	case err := <-tail2Done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(tail2Err.String(), "gave up on the admin API at unix/"+e2.admin) {
			t.Errorf("the killed edge's tail ended with %v, want status 1 naming unix/%s:\n%s", err, e2.admin, tail2Err.String())
		}
	case <-time.After(30 * time.Second):
		_ = tail2.Process.Kill()
		<-tail2Done
		t.Errorf("the killed edge's tail did not give up within 30s (--reconnect 2s):\n%s", tail2Err.String())
	}
	waitJS("the console names the missing node", fmt.Sprintf(`document.getElementById("nodes").dataset.missing.includes(%q)`, n2), 15*time.Second)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`)); err != nil {
		t.Fatal(err)
	}
	shot(t, ctx, br.shots, "console-cluster")
	br.watch.check(t)

	// the first edge restarted: the tail says the stream stopped, reconnects,
	// says so, and prints what the restarted node answers
	e1.kill()
	e1.start()
	testkit.WaitForState(t, func() string { return fmt.Sprintf("the tail's notes of the restart:\n%s", tailErr.String()) },
		func() bool {
			return tailErr.has("(the stream from the admin API at unix/"+e1.admin+" stopped") &&
				tailErr.has("(reconnected to the admin API at unix/"+e1.admin)
		})
	n1 = e1.nodeName(t)
	mark = tailOut.count()
	post(e1, "/hooks/agent", `{"message":"after the restart"}`)
	testkit.WaitForState(t, func() string {
		return fmt.Sprintf("the tail after the restart (after line %d):\n%s", mark, tailOut.String())
	},
		func() bool { return tailOut.hasSince(mark, n1, " agent ") })
	t.Logf("cluster tail:\n%s\nits notes:\n%s\nthe second edge's tail:\n%s", tailOut.String(), tailErr.String(), tail2Err.String())
	if dst := os.Getenv("CADDYHOOK_CLUSTER_PNG"); dst != "" && !t.Failed() {
		// refreshes docs/console-cluster.png: CADDYHOOK_CLUSTER_PNG=$PWD/docs/console-cluster.png
		b, err := os.ReadFile(filepath.Join(br.shots, "console-cluster.png"))
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
