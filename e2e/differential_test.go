//go:build openclaw

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// settleTimeout bounds how long one phase waits for the gateway to finish
// the runs and heartbeats its cases started.
const settleTimeout = 150 * time.Second

// differentialAllow is the allow-list of TestDifferential: every
// difference between the gateway called directly and the gateway behind
// `caddy hooks import`'s edge must be listed here, with its reason (and
// the same reason in the README's "Fronting a real gateway"). fields are
// the observation fields that may differ.
var differentialAllow = map[string]struct {
	fields []string
	reason string
}{
	"lockout: 21 wrong tokens, then the right one": {
		fields: []string{"send22."},
		reason: "strict lockout: a locked-out address gets no credential evaluated at the edge, not even the right token (the gateway lets the right token through a lock)",
	},
	"content type text/plain": {
		fields: []string{"send1."},
		reason: "415 for non-JSON: the edge parses only bodies declared as JSON (the gateway parses any body)",
	},
	"invalid JSON": {
		fields: []string{"send1.reply"},
		reason: "both refuse with 400; the gateway's error is Node's JSON.parse message, the edge says invalid JSON body",
	},
	"token in the query": {
		fields: []string{"send1.reply", "send1.headers.Content-Type"},
		reason: "both refuse with 400; the edge answers with a JSON error body like every other refusal, the gateway with plain text",
	},
	"sender X-Forwarded-For": {
		fields: []string{"send1."},
		reason: "edge-only protection: the edge resolves the client address itself and never passes a sender's X-Forwarded-For on; the gateway refuses the header from an untrusted peer with 403",
	},
	"lockout: 21 wrong tokens, then a GET": {
		fields: []string{"send22."},
		reason: "strict lockout: a locked-out address is answered 429 before anything else about its request is looked at, its method included (the gateway checks the method first: 405)",
	},
	"token parameter in another case": {
		fields: []string{"send1."},
		reason: "the edge refuses a token parameter in any case or encoding (?Token=, ?%74oken=) with 400; the gateway only the exact name token",
	},
	"raw UTF-8 request line": {
		fields: []string{"send1.reply", "send1.headers."},
		reason: "both refuse with 400; the gateway's HTTP parser answers with an empty body, the edge with a JSON error",
	},
	"dump: credential headers": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "no credential header of the sender's crosses the edge, whatever its name (the gateway's mappings and transforms see every header, and can put them into the prompt)",
	},
	"dump: x-openclaw-token header": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "the sender's token header does not cross; the gateway sees the edge's own credential (Authorization: Bearer <hooks.token>) instead",
	},
	"dump: client-address and override headers": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "client-address, forwarding and request-override headers are what a proxy asserts, never a sender: they do not cross",
	},
	"dump: malformed traceparent": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "trace context crosses only when well formed: a malformed traceparent is dropped with its tracestate",
	},
	"D24 unclosed deep nesting": {
		fields: []string{"send1.reply"},
		reason: "both refuse with 400; the gateway's error is Node's JSON.parse message, the edge says invalid JSON body",
	},
	"D32 valid x-openclaw-token, wrong x-service-token": {
		fields: []string{"send1."},
		reason: "the edge refuses a request that carries any wrong token value, in any token header (the gateway reads the first header it finds and lets a valid X-OpenClaw-Token through beside a wrong x-service-token): never more permissive than the gateway",
	},
	"tokens: valid bearer, wrong x-openclaw": {
		fields: []string{"send1."},
		reason: "the edge refuses a request that carries any wrong token value (the gateway reads Authorization first and lets a valid one through beside a wrong X-OpenClaw-Token): never more permissive than the gateway",
	},
	"tokens: bearer twice, valid and wrong": {
		fields: []string{"send1."},
		reason: "the edge checks every Authorization header (the gateway's HTTP parser keeps only the first, and lets a valid one through before a wrong one): never more permissive than the gateway",
	},
	"B13 identity headers": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "identity headers a proxy in front asserts (Client-Cert, X-Arr-Clientcert, X-Vouch-User, X-Consumer-Username, X-Remote-User) and one-time codes (X-Otp) do not cross",
	},
	"dump: over-long tracestate": {
		fields: []string{"send1.runs[0].prompt"},
		reason: "a tracestate over 512 characters is dropped (the traceparent crosses)",
	},
}

// TestDifferential runs the real gateway with a config of its own
// (testdata/differential/openclaw.json5: the gmail preset and 18
// mappings), puts the edge that `caddy hooks import` writes from that
// same file in front of it, sends every case of differentialCases to
// both (the gateway with its hooks token, the edge with the public
// token) and compares what the sender got and what the agent received,
// through a model provider stub that records every prompt and the
// gateway's own log of each finished run.
func TestDifferential(t *testing.T) {
	start := time.Now()
	inst := locateOpenclaw(t)
	stub := newModelStub(t)
	gw := newOpenclawGatewayWith(t, inst, func(g *openclawGateway) error { return writeDifferentialConfig(g, stub) })
	bin := testkit.CaddyBinary(t)
	caddyfile, notes := importEdgeConfig(t, bin, gw.configPath())
	edge := startImportedEdge(t, bin, caddyfile, gw.hooksToken)
	// the same edge with a local spool and with spool cluster (issue 35)
	nats := natstest.Run(t, natstest.Options{})
	spoolEdge := startImportedEdge(t, bin, withHooksLines(t, caddyfile, spoolLines(t.TempDir())), gw.hooksToken)
	clusterEdge := startImportedEdge(t, bin, withHooksLines(t, caddyfile, clusterLines(nats.URL())), gw.hooksToken)

	cases := differentialCases()
	sends := 0
	for _, c := range cases {
		for _, s := range c.sends {
			sends += max(s.repeat, 1)
		}
	}
	if len(cases) < 60 {
		t.Fatalf("%d cases, want at least 60", len(cases))
	}
	t.Logf("%d cases (%d requests per side); import notes:\n%s", len(cases), sends, notes)

	direct := diffTarget{name: "gateway", base: gw.baseURL() + "/hooks", token: gw.hooksToken}
	viaEdge := diffTarget{name: "edge", base: edge.base, token: edge.token}
	phase := func(tg diffTarget) [][]sentReply {
		t0 := time.Now()
		replies := runPhase(t, tg, gw, cases)
		settle(t, gw, stub, replies)
		// a last heartbeat of the main session, once everything above has
		// settled: it carries what the phase's runs and keyed wakes left
		// for the main session (their notices land there afterwards), so
		// that both phases end with the same
		flush := sendOne(t, direct, diffSend{sub: "/wake", body: `{"text":"flush @N@"}`}, newNonce(t))
		if flush.status != http.StatusOK {
			t.Fatalf("flush wake: %d %s", flush.status, flush.body)
		}
		settle(t, gw, stub, [][]sentReply{{flush}})
		t.Logf("%s phase: sent and settled in %v", tg.name, time.Since(t0).Round(time.Millisecond))
		return replies
	}
	gotDirect := phase(direct)
	gotEdge := phase(viaEdge)

	// the allPaths cases through the spooled edges, and the checks of
	// what only a spool shows (acceptance order, a bounded retry)
	var pathsReport strings.Builder
	pathsUnexpected := 0
	directViews := make([][]agentView, len(cases))
	for i, c := range cases {
		if c.allPaths {
			directViews[i] = viewOf(gw, stub, gotDirect[i])
		}
	}
	spooledEdges := []struct {
		name string
		edge importedEdge
	}{{"spool", spoolEdge}, {"cluster", clusterEdge}}
	for _, p := range spooledEdges {
		tg := diffTarget{name: p.name, base: p.edge.base, token: p.edge.token}
		views := spooledPhase(t, p.name, tg, gw, stub, cases, directViews)
		pathsUnexpected += compareSpooled(p.name, cases, directViews, views, &pathsReport)
	}
	for _, p := range append([]struct {
		name string
		edge importedEdge
	}{{"sync", edge}}, spooledEdges...) {
		admin := p.edge.admin
		if p.name == "sync" {
			admin = "" // nothing to pause
		}
		tg := diffTarget{name: p.name, base: p.edge.base, token: p.edge.token}
		if msg := checkWakeOrder(t, tg, admin, gw, stub); msg != "" {
			pathsUnexpected++
			fmt.Fprintf(&pathsReport, "- [UNEXPECTED] %s D31 wake mapping order: %s\n", p.name, msg)
		} else {
			fmt.Fprintf(&pathsReport, "- [equal] %s D31 wake mapping order: %d wakes reached the agent in acceptance order\n", p.name, wakeOrderSends)
		}
		if p.name == "sync" {
			continue
		}
		if msg := checkIdenticalDeadLetter(t, tg, p.edge.admin); msg != "" {
			pathsUnexpected++
			fmt.Fprintf(&pathsReport, "- [UNEXPECTED] %s item 9, a transform that always throws: %s\n", p.name, msg)
		} else {
			fmt.Fprintf(&pathsReport, "- [allowed] %s item 9, a transform that always throws: accepted (the spool's 200), then a dead letter with the gateway's 500 after max_identical_errors answers\n", p.name)
		}
	}
	t.Logf("dispatch paths (spool, cluster):\n%s", pathsReport.String())

	runs, err := readHookRuns(gw.fileLogPath())
	if err != nil {
		t.Fatal(err)
	}
	calls := stub.snapshot()
	var report strings.Builder
	unexpected, allowedSeen := 0, map[string]bool{}
	dump := map[string][2][]sendObservation{}
	for i, c := range cases {
		a := observeCase(gotDirect[i], runs, calls)
		b := observeCase(gotEdge[i], runs, calls)
		dump[c.name] = [2][]sendObservation{a, b}
		diffs := diffObservations(a, b)
		if len(diffs) == 0 {
			continue
		}
		allow, listed := differentialAllow[c.name]
		for _, d := range diffs {
			ok := listed && slices.ContainsFunc(allow.fields, func(f string) bool { return strings.HasPrefix(d.field, f) })
			mark := "UNEXPECTED"
			if ok {
				mark, allowedSeen[c.name] = "allowed", true
			} else {
				unexpected++
			}
			fmt.Fprintf(&report, "- [%s] %s: %s\n    gateway: %s\n    edge:    %s\n", mark, c.name, d.field, d.direct, d.edge)
		}
	}
	for name := range differentialAllow {
		if !allowedSeen[name] {
			unexpected++
			fmt.Fprintf(&report, "- [UNUSED ALLOWANCE] %s: no difference any more; remove it from the allow-list and the README\n", name)
		}
	}
	if path := os.Getenv("CADDYHOOK_DIFF_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report.String()), 0o644); err != nil {
			t.Error(err)
		}
		// every observation, [gateway, edge] per case, for reading a
		// difference whose text the report cuts
		data, _ := json.MarshalIndent(dump, "", "  ")
		if err := os.WriteFile(path+".json", data, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Logf("differential: %d cases, %d requests per side, %d runs logged, %d model calls, in %v",
		len(cases), sends, len(runs), len(calls), time.Since(start).Round(time.Second))
	if unexpected+pathsUnexpected > 0 {
		t.Fatalf("%d differences outside the allow-list:\n%s%s", unexpected+pathsUnexpected, report.String(), pathsReport.String())
	}
	t.Logf("allowed differences:\n%s", report.String())
}

// writeDifferentialConfig fills in the differential config and puts its
// transforms where the gateway looks for them (<config dir>/hooks/transforms).
func writeDifferentialConfig(g *openclawGateway, stub *modelStub) error {
	src, err := os.ReadFile(filepath.Join("testdata", "differential", "openclaw.json5"))
	if err != nil {
		return err
	}
	cfg := strings.NewReplacer(
		"__PORT__", strconv.Itoa(g.port),
		"__AUTH_TOKEN__", g.authToken,
		"__HOOKS_TOKEN__", g.hooksToken,
		"__MODEL_URL__", stub.baseURL(),
		"__LOG_FILE__", g.fileLogPath(),
	).Replace(string(src))
	if err := g.writeConfigFile([]byte(cfg)); err != nil {
		return err
	}
	dst := filepath.Join(filepath.Dir(g.configPath()), "hooks", "transforms")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join("testdata", "differential", "transforms", "*.js"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// importEdgeConfig runs `caddy hooks import` on the gateway's config and
// returns the Caddyfile (stdout) and the notes (stderr).
func importEdgeConfig(t *testing.T, bin, config string) (string, string) {
	t.Helper()
	args := []string{"hooks", "import", config}
	if m := os.Getenv("CADDYHOOK_DIFF_MODE"); m != "" {
		args = append(args, "--mode", m)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = caddyEnv(t.TempDir(), "import")
	var out, notes bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &notes
	if err := cmd.Run(); err != nil {
		t.Fatalf("caddy hooks import: %v\n%s", err, notes.String())
	}
	if !strings.Contains(notes.String(), "gateway side: nothing to change") {
		t.Errorf("import asks for gateway-side changes the test config does not need:\n%s", notes.String())
	}
	return out.String(), notes.String()
}

// importedEdge is Caddy running the imported Caddyfile, unchanged.
type importedEdge struct {
	base  string // http://127.0.0.1:<port>/hooks
	token string // the public hook token
	admin string // the admin endpoint's Unix socket
}

// startImportedEdge runs `caddy run --adapter caddyfile` on caddyfile with
// the environment it documents: the site, the public token and the
// gateway's hooks token. The admin endpoint goes to a socket of its own.
// The only line the test adds is a global `default_bind fd/3`: the site
// listens on a socket the test holds from start to end.
func startImportedEdge(t *testing.T, bin, caddyfile, gatewayToken string) importedEdge {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte("{\n\tdefault_bind fd/3\n}\n\n"+caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	ln := listenLoopback(t)
	sock, err := ln.File() // fd 3 in the child
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	e := importedEdge{base: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/hooks", token: randomToken(t),
		admin: filepath.Join(dir, "admin.sock")}
	marker := randomToken(t)
	logPath := filepath.Join(dir, "caddy.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(caddyEnv(dir, marker),
		// the import's default site (every host name) on the test's port
		"HOOKS_SITE=http://:"+strconv.Itoa(port),
		"HOOK_TOKEN="+e.token,
		"OPENCLAW_HOOKS_TOKEN="+gatewayToken,
		"CADDY_ADMIN=unix/"+e.admin,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{sock}
	cmd.SysProcAttr = processGroupAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stopGroup(cmd.Process.Pid, exited, 10*time.Second)
		for _, p := range taggedProcesses(markerEnv + "=" + marker) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("edge log tail:\n%s", tailFile(logPath, 40))
		}
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(edgeReadyTimeout)
	for {
		select {
		case <-exited:
			t.Fatalf("caddy exited during startup:\n%s", tailFile(logPath, 40))
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := client.Get(e.base + "/wake"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusMethodNotAllowed {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the imported edge did not serve within %v:\n%s", edgeReadyTimeout, tailFile(logPath, 40))
		}
	}
}

// diffTarget is one side: where to send and with which token.
type diffTarget struct {
	name, base, token string
}

// sentReply is one answer and the nonce its request carried.
type sentReply struct {
	nonce  string
	status int
	header http.Header
	body   []byte
}

// runWindow is how many agent runs a phase keeps in flight: the gateway
// admits a run only once it has started (15 s deadline), so a deep queue
// on a slow machine would turn into 503s that depend on timing.
const runWindow = 3

// runPhase sends every case to tg, in order, with at most runWindow of
// the runs it started unfinished before each send.
func runPhase(t *testing.T, tg diffTarget, gw *openclawGateway, cases []diffCase) [][]sentReply {
	out := make([][]sentReply, len(cases))
	var started []string
	for i, c := range cases {
		for _, s := range c.sends {
			nonce := newNonce(t)
			for range max(s.repeat, 1) {
				started = waitForRunWindow(t, gw, started, runWindow)
				r := sendOne(t, tg, s, nonce)
				for try := 0; try < admissionRetries && notAdmitted(r); try++ {
					// The gateway gave up waiting for a free run slot (a
					// slow machine): retry once the runs in flight are
					// done, as a sender would. Admitted runs are not redone.
					t.Logf("%s %s: %d %s; retrying", tg.name, c.name, r.status, r.body)
					started = waitForRunWindow(t, gw, append(started, replyRunIDs(r.body)...), 0)
					r = sendOne(t, tg, s, nonce)
				}
				started = append(started, admittedRunIDs(r)...)
				out[i] = append(out[i], r)
			}
		}
	}
	return out
}

// admissionRetries bounds the resends of a request the gateway could not
// admit in time.
const admissionRetries = 2

// notAdmitted reports the gateway's 503 for work it could not start within
// its admission deadline (a single run, or a fan-out left pending).
func notAdmitted(r sentReply) bool {
	return r.status == http.StatusServiceUnavailable &&
		(bytes.Contains(r.body, []byte("admission timeout")) || bytes.Contains(r.body, []byte("pending")))
}

// waitForRunWindow waits (bounded) until at most window of started are
// unfinished, and returns the unfinished ones.
func waitForRunWindow(t *testing.T, gw *openclawGateway, started []string, window int) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		runs, err := readHookRuns(gw.fileLogPath())
		if err != nil {
			t.Fatal(err)
		}
		var open []string
		for _, id := range started {
			if _, done := runs[id]; !done {
				open = append(open, id)
			}
		}
		if len(open) <= window || time.Now().After(deadline) {
			return open
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// sendOne sends s to tg with nonce filled in.
func sendOne(t *testing.T, tg diffTarget, s diffSend, nonce string) sentReply {
	t.Helper()
	fill := func(v string) string { return strings.ReplaceAll(v, nonceMark, nonce) }
	method := s.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(fill(s.body))
		if s.chunked {
			body = io.MultiReader(body) // no length known: sent chunked
		}
	}
	req, err := http.NewRequest(method, tg.base+fill(s.sub), body)
	if err != nil && s.raw {
		req, err = http.NewRequest(method, tg.base, body)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.raw {
		// written on the request line as it is (a '#' or a '\' too)
		base, _ := url.Parse(tg.base)
		req.URL.Opaque = base.Path + fill(s.sub)
	}
	if s.host != "" {
		req.Host = fill(s.host)
	}
	switch s.contentType {
	case "":
		req.Header.Set("Content-Type", "application/json")
	case "-":
	default:
		req.Header.Set("Content-Type", s.contentType)
	}
	hdrs, ok := credHeaders[s.cred]
	if !ok {
		t.Fatalf("unknown credential %q", s.cred)
	}
	for _, kv := range hdrs {
		req.Header.Add(kv[0], strings.NewReplacer(credValid, tg.token, credBad, "wrong-"+tg.token[:16]).Replace(kv[1]))
	}
	for k, v := range s.headers {
		req.Header.Set(k, fill(v))
	}
	source := s.source
	if source == "" {
		source = "127.0.0.1"
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	// a connection per send, closed afterwards; keep-alive on so that the
	// request carries no hop-by-hop Connection header (which no proxy
	// passes on, and the dump mapping would show)
	tr := &http.Transport{DialContext: dialer.DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 90 * time.Second, Transport: tr}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s %s: %v", tg.name, method, s.sub, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return sentReply{nonce: nonce, status: resp.StatusCode, header: resp.Header, body: data}
}

// newNonce returns a fresh nonce ("nc" and 12 hex digits).
func newNonce(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "nc" + hex.EncodeToString(b)
}

// admittedRunIDs lists the runs an answer says were admitted: the run ids
// of a 2xx answer. (A 503 names the run whose admission timed out; the
// gateway cancels it, so it never finishes.)
func admittedRunIDs(r sentReply) []string {
	if r.status/100 != 2 {
		return nil
	}
	return replyRunIDs(r.body)
}

// replyRunIDs lists the run ids of an answer (runId, then runIds).
func replyRunIDs(body []byte) []string {
	var r struct {
		RunID  string   `json:"runId"`
		RunIDs []string `json:"runIds"`
	}
	_ = json.Unmarshal(body, &r)
	var ids []string
	for _, id := range append([]string{r.RunID}, r.RunIDs...) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// isWakeReply reports an accepted wake (direct or mapped).
func isWakeReply(r sentReply) bool {
	var w struct {
		EventOutcome string `json:"eventOutcome"`
	}
	return r.status == http.StatusOK && json.Unmarshal(r.body, &w) == nil && w.EventOutcome != ""
}

// settle waits until every run the replies name has finished (the
// gateway logged it) and every accepted wake's text reached a model call.
func settle(t *testing.T, gw *openclawGateway, stub *modelStub, replies [][]sentReply) {
	t.Helper()
	var wantRuns, wantWakes []string
	for _, c := range replies {
		for _, r := range c {
			wantRuns = append(wantRuns, admittedRunIDs(r)...)
			if isWakeReply(r) {
				wantWakes = append(wantWakes, r.nonce)
			}
		}
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		runs, err := readHookRuns(gw.fileLogPath())
		if err != nil {
			t.Fatal(err)
		}
		var missingRuns, missingWakes []string
		for _, id := range wantRuns {
			if _, ok := runs[id]; !ok {
				missingRuns = append(missingRuns, id)
			}
		}
		calls := stub.snapshot()
		for _, n := range wantWakes {
			if !slices.ContainsFunc(calls, func(c modelCall) bool { return strings.Contains(c.text(), n) }) {
				missingWakes = append(missingWakes, n)
			}
		}
		if len(missingRuns) == 0 && len(missingWakes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("after %v: %d runs not finished, %d wakes not seen by the model (compared as such)", settleTimeout, len(missingRuns), len(missingWakes))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// sendObservation is what one send produced, normalised.
type sendObservation struct {
	Status  int               `json:"status"`
	Reply   string            `json:"reply"`
	Headers map[string]string `json:"headers,omitempty"`
	Runs    []runObservation  `json:"runs,omitempty"`
	Wakes   []string          `json:"wakes,omitempty"`
}

// runObservation is what the agent received for one run.
type runObservation struct {
	Finished          bool   `json:"finished"`
	SourcePath        string `json:"sourcePath"`
	Name              string `json:"name"`
	AgentID           string `json:"agentId"`
	SessionKey        string `json:"sessionKey"`
	Status            string `json:"status"`
	Deliver           string `json:"deliver"`
	DeliveryAttempted string `json:"deliveryAttempted"`
	Delivered         string `json:"delivered"`
	DeliveryError     string `json:"deliveryError"`
	Summary           string `json:"summary"`
	Model             string `json:"model"`
	RequestedModel    string `json:"requestedModel"`
	ReasoningEffort   string `json:"reasoningEffort"`
	Prompt            string `json:"prompt"`
}

// observeCase normalises one case's sends.
func observeCase(sent []sentReply, runs map[string]hookRunRecord, calls []modelCall) []sendObservation {
	n := newNormaliser()
	out := make([]sendObservation, len(sent))
	for i, r := range sent {
		o := sendObservation{Status: r.status, Reply: n.reply(r), Headers: map[string]string{}}
		for _, h := range []string{"Allow", "X-Content-Type-Options", "Content-Type"} {
			if v := r.header.Get(h); v != "" {
				o.Headers[h] = v
			}
		}
		if r.header.Get("Retry-After") != "" {
			o.Headers["Retry-After"] = "present"
		}
		for _, id := range admittedRunIDs(r) {
			o.Runs = append(o.Runs, n.run(runs[id], calls))
		}
		if isWakeReply(r) {
			seen := map[string]bool{}
			for _, c := range calls {
				for _, line := range eventLines(c.text()) {
					if strings.Contains(line, r.nonce) {
						seen[n.text(line)] = true
					}
				}
			}
			for l := range seen {
				o.Wakes = append(o.Wakes, l)
			}
			sort.Strings(o.Wakes)
		}
		out[i] = o
	}
	return out
}

// eventLines splits a prompt into lines; the system events of a heartbeat
// sit in a JSON string inside the runtime context, one per escaped \n.
func eventLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, part := range strings.Split(line, `\n`) {
			out = append(out, strings.Trim(part, `"`))
		}
	}
	return out
}

// Run-specific values replaced before comparing.
var (
	uuidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	nonceRE    = regexp.MustCompile(`nc[0-9a-f]{12}`)
	boundaryRE = regexp.MustCompile(`id="[0-9a-f]{16}"`)
	isoTimeRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z| UTC)?`)
	longDateRE = regexp.MustCompile(`(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), \w+ \d+\w\w, \d{4} - \d{1,2}:\d{2} (AM|PM)`)
	shortTSRE  = regexp.MustCompile(`\[\w{3} \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\]`)
	// the Host a sender addressed: the gateway's port or the edge's
	loopbackRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// normaliser replaces run-specific values; run ids become <run-1>,
// <run-2>… in order of first appearance within a case, so a replay that
// returns the first run id stays visible.
type normaliser struct{ runs map[string]string }

func newNormaliser() *normaliser { return &normaliser{runs: map[string]string{}} }

// text normalises free text.
func (n *normaliser) text(s string) string {
	s = uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if r, ok := n.runs[id]; ok {
			return r
		}
		return "<uuid>"
	})
	s = nonceRE.ReplaceAllString(s, "<nonce>")
	s = boundaryRE.ReplaceAllString(s, `id="<boundary>"`)
	s = longDateRE.ReplaceAllString(s, "<date>")
	s = shortTSRE.ReplaceAllString(s, "[<date>]")
	s = loopbackRE.ReplaceAllString(s, "127.0.0.1:<port>")
	return isoTimeRE.ReplaceAllString(s, "<time>")
}

// reply normalises an answer body: JSON re-encoded with run ids numbered,
// anything else as text (quoted, so that a trailing newline shows).
func (n *normaliser) reply(r sentReply) string {
	for _, id := range replyRunIDs(r.body) {
		if _, ok := n.runs[id]; !ok {
			n.runs[id] = "<run-" + strconv.Itoa(len(n.runs)+1) + ">"
		}
	}
	var v any
	if len(bytes.TrimSpace(r.body)) == 0 {
		return "empty"
	}
	if json.Unmarshal(r.body, &v) != nil {
		return "text " + strconv.Quote(n.text(string(r.body)))
	}
	b, _ := json.Marshal(v)
	return n.text(string(b))
}

// run normalises one run: the gateway's record and the model call of its job.
func (n *normaliser) run(rec hookRunRecord, calls []modelCall) runObservation {
	if rec.RunID == "" {
		return runObservation{}
	}
	flag := func(b *bool) string {
		if b == nil {
			return "unset"
		}
		return strconv.FormatBool(*b)
	}
	o := runObservation{
		Finished: true, SourcePath: rec.SourcePath, Name: rec.Name, AgentID: rec.AgentID,
		SessionKey: n.text(rec.LogicalSessionKey), Status: rec.Status, Deliver: flag(rec.Deliver),
		DeliveryAttempted: flag(rec.DeliveryAttempted), Delivered: flag(rec.Delivered),
		DeliveryError: n.text(rec.DeliveryError), Summary: n.text(rec.Summary), Model: rec.Model,
	}
	// the run's own user message: in a persistent session the model
	// also gets the session's earlier messages (the other side's run of
	// the same case among them), so it is found by its job id
	for _, c := range calls {
		i := slices.IndexFunc(c.User, func(u string) bool { return strings.Contains(u, "Job ID: "+rec.JobID) })
		if i >= 0 {
			o.RequestedModel, o.ReasoningEffort, o.Prompt = c.Model, c.ReasoningEffort, n.text(c.User[i])
			break
		}
	}
	return o
}

// observationDiff is one field that differs between the two sides.
type observationDiff struct{ field, direct, edge string }

// diffObservations lists the fields in which two cases' observations differ.
func diffObservations(a, b []sendObservation) []observationDiff {
	var out []observationDiff
	if len(a) != len(b) {
		return []observationDiff{{field: "sends", direct: strconv.Itoa(len(a)), edge: strconv.Itoa(len(b))}}
	}
	for i := range a {
		prefix := "send" + strconv.Itoa(i+1) + "."
		fa, fb := flatten(a[i]), flatten(b[i])
		keys := map[string]bool{}
		for k := range fa {
			keys[k] = true
		}
		for k := range fb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if fa[k] != fb[k] {
				out = append(out, observationDiff{field: prefix + k, direct: orAbsent(fa[k]), edge: orAbsent(fb[k])})
			}
		}
	}
	return out
}

// flatten turns an observation into field path → JSON value.
func flatten(o sendObservation) map[string]string {
	var v any
	b, _ := json.Marshal(o)
	_ = json.Unmarshal(b, &v)
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			out[path+".count"] = strconv.Itoa(len(x))
			for i, e := range x {
				walk(path+"["+strconv.Itoa(i)+"]", e)
			}
		default:
			b, _ := json.Marshal(x)
			out[path] = string(b)
		}
	}
	walk("", v)
	return out
}

// orAbsent marks a missing field.
func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
