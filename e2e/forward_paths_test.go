//go:build openclaw

package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// The forward cells of the combination matrix (issue 21, Build 2) against
// the real gateway: caddyhook in forward mode in front of it through each
// dispatch path, the kinds of the matrix through each. What is compared is
// what the gateway's agent received (its own record of each run and the
// prompt the model provider stub got) and what a heartbeat carried for a
// wake. A request the gateway can take as it is (everything but the
// edge's own render and transform mappings) is compared with the same
// request sent to the gateway directly; the edge's renderings with what
// the sync path sent. caddyhook/combination_matrix_test.go holds the
// whole matrix against the recording devgateway.

// Secrets of the edge (literals: accepted with a warning).
const (
	pathsCluster      = "e2e-cluster-signing-key-5a4b3c2d1e0f9a8b7c6d"
	pathsGitHubSecret = "e2e-github-secret-1f2e3d4c5b6a7980"
)

// pathsTransform is the edge's transform mapping's module.
const pathsTransform = `export default (ctx) => ({ message: "Paths transform " + ctx.payload.nonce + " kind=" + ctx.headers["x-kind"] });
`

// pathsHooks are the hooks lines of every edge site: forward mode, the
// gmail preset, forward mappings for the gateway's dump and github
// mappings (github signed: the edge checks GitHub's signature), and two
// mappings the edge renders itself (a template, a transform) into agent
// runs.
func pathsHooks(transforms string) []string {
	return []string{"mode forward", "agents main", "idempotency_headers x-openclaw-idempotency-key", "presets gmail",
		"transforms_root " + transforms,
		"mapping dump {\n\tmatch_path dump\n\tforward\n}",
		"mapping github {\n\tmatch_path github\n\tforward\n\tverify github {\n\t\tsecret " + pathsGitHubSecret + "\n\t}\n}",
		"mapping deploy {\n\tmatch_path deploy\n\tname Deploy\n\tmessage_template \"Paths render {{payload.nonce}} env={{query.env}} by {{headers.x-actor}}\"\n}",
		"mapping transformed {\n\tmatch_path transformed\n\ttransform paths.js\n}",
	}
}

// pathsSend is one request of every cell, with what it must start on the
// gateway: runs (agent runs) or a wake (a heartbeat line).
type pathsSend struct {
	name string
	diffSend
	runs int
	wake bool
	// edgeOnly: a mapping the edge renders; compared with the sync path.
	edgeOnly bool
	// signed: sent to the edge with GitHub's signature and no token (to
	// the gateway with its token; it ignores the signature).
	signed bool
	// edgeKey: the sender gives no key the gateway reads, so a spooled
	// request carries the edge's event id as its Idempotency-Key, the one
	// documented difference a forwarded request has on a spooled path
	// (README "Two modes"); the dump mapping shows it.
	edgeKey bool
}

// pathsSends are the requests of a cell: a wake; an agent run with the
// sender's key; the gmail preset (two runs) with the gateway's own key
// header; the dump mapping (its prompt is the path, query and every
// header the gateway's mapping saw) with provider headers and the trace
// context, without a key and with one; the github mapping signed; the
// edge's template and transform mappings.
func pathsSends() []pathsSend {
	provider := map[string]string{"User-Agent": "GitHub-Hookshot/abc", "X-GitHub-Event": "push", "X-GitHub-Delivery": "d-@N@",
		"Traceparent": traceParent, "Tracestate": "vendor=a,other=b"}
	keyed := maps.Clone(provider)
	keyed["Idempotency-Key"] = "dump-@N@"
	return []pathsSend{
		{name: "wake", diffSend: diffSend{sub: "/wake", body: `{"text":"Paths wake @N@"}`}, wake: true},
		{name: "agent", diffSend: diffSend{sub: "/agent", body: `{"message":"Paths agent @N@","deliver":false}`,
			headers: map[string]string{"Idempotency-Key": "paths-@N@"}}, runs: 1},
		{name: "preset", diffSend: diffSend{sub: "/gmail", body: `{"messages":[{"id":"@N@-1","from":"a@b","subject":"s @N@","snippet":"x","body":"y"},` +
			`{"id":"@N@-2","from":"c@d","subject":"t @N@","snippet":"z","body":"w"}]}`,
			headers: map[string]string{"X-OpenClaw-Idempotency-Key": "gmail-@N@"}}, runs: 2},
		{name: "forward", diffSend: diffSend{sub: "/dump?q=@N@&kind=paths", body: `{"nonce":"@N@"}`, headers: provider}, runs: 1, edgeKey: true},
		{name: "forward keyed", diffSend: diffSend{sub: "/dump?q=@N@", body: `{"nonce":"@N@"}`, headers: keyed}, runs: 1},
		{name: "signed", diffSend: diffSend{sub: "/github", body: `{"repository":{"full_name":"octo/paths-@N@"},"sender":{"login":"u"},"nonce":"@N@"}`,
			headers: map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "g-@N@"}}, runs: 1, signed: true},
		{name: "render", diffSend: diffSend{sub: "/deploy?env=prod", body: `{"nonce":"@N@"}`,
			headers: map[string]string{"X-Actor": "alice", "Idempotency-Key": "render-@N@"}}, runs: 1, edgeOnly: true},
		{name: "transform", diffSend: diffSend{sub: "/transformed", body: `{"nonce":"@N@"}`,
			headers: map[string]string{"X-Kind": "paths"}}, runs: 1, edgeOnly: true},
	}
}

// request is s as sent to the gateway (direct) or to an edge, with nonce.
func (s pathsSend) request(direct bool, nonce string) diffSend {
	d := s.diffSend
	if s.signed {
		d.body = strings.ReplaceAll(d.body, nonceMark, nonce)
		mac := hmac.New(sha256.New, []byte(pathsGitHubSecret))
		mac.Write([]byte(d.body))
		d.headers = maps.Clone(d.headers)
		d.headers["X-Hub-Signature-256"] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if !direct {
			d.cred = credNone
		}
	}
	return d
}

// pathsObservation is what one request produced at the gateway.
type pathsObservation struct {
	Runs  []runObservation `json:"runs,omitempty"`
	Wakes []string         `json:"wakes,omitempty"`
}

// TestForwardDispatchPaths sends pathsSends to the gateway directly, then
// through caddyhook in forward mode: sync, `spool <dir>`, `spool cluster`
// on one NATS server (an edge with deliver off and a delivery node), and
// the same with the edge cut off from NATS and `fallback <dir>` (accepted
// into the fallback spool, moved into the queue once NATS is back). Every
// path's observations must equal the direct ones (the edge's renderings:
// the sync path's), but for the Idempotency-Key a spooled request without
// one gets (the reply's event id); the replies are the gateway's (sync)
// or the event ids (spooled).
func TestForwardDispatchPaths(t *testing.T) {
	start := time.Now()
	inst := locateOpenclaw(t)
	stub := newModelStub(t)
	gw := newOpenclawGatewayWith(t, inst, func(g *openclawGateway) error { return writeDifferentialConfig(g, stub) })
	bin := testkit.CaddyBinary(t)
	nats := natstest.Run(t, natstest.Options{})
	fbEdge := natstest.NewProxy(t, nats.Addr()) // the fallback edge's way to NATS, cut for its cell

	transforms := t.TempDir()
	if err := os.WriteFile(filepath.Join(transforms, "paths.js"), []byte(pathsTransform), 0o600); err != nil {
		t.Fatal(err)
	}
	forward := pathsHooks(transforms)
	cluster := func(name, url string, spool ...string) []string {
		return append(slices.Clone(forward),
			"cluster nats "+url+" {\n\tname "+name+"\n\ttimeout 5s\n\tack_wait 30s\n\tsigning_key "+pathsCluster+"\n}",
			"spool cluster {\n\t"+strings.Join(spool, "\n\t")+"\n}")
	}
	delivery := []string{"fallback reject", "retry_initial 200ms", "retry_max 2s"}
	site := func(extra []string) edgeSite {
		return edgeSite{ln: listenLoopback(t), gateway: gw.addr(), extra: extra}
	}
	adminSock := filepath.Join(t.TempDir(), "admin.sock")
	cfg := edgeConfig{edgeToken: randomToken(t), gatewayToken: gw.hooksToken, admin: "unix/" + adminSock, sites: []edgeSite{
		site(forward), // sync
		site(append(slices.Clone(forward), "spool "+t.TempDir()+" {\n\tretry_initial 200ms\n\tretry_max 2s\n}")),
		site(cluster("e2e-r1", nats.URL(), "deliver off", "fallback reject")),
		site(cluster("e2e-r1", nats.URL(), delivery...)),
		site(cluster("e2e-fb", fbEdge.URL(), "deliver off", "fallback "+t.TempDir())),
		site(cluster("e2e-fb", nats.URL(), delivery...)),
	}}
	startEdge(t, bin, cfg)
	edge := func(i int) string { return "http://" + cfg.sites[i].addr() + "/hooks" }
	cells := []struct {
		name    string
		target  diffTarget
		spooled bool
	}{
		{"direct", diffTarget{name: "gateway", base: gw.baseURL() + "/hooks", token: gw.hooksToken}, false},
		{"sync", diffTarget{name: "sync", base: edge(0), token: cfg.edgeToken}, false},
		{"spool", diffTarget{name: "spool", base: edge(1), token: cfg.edgeToken}, true},
		{"cluster-R1", diffTarget{name: "cluster", base: edge(2), token: cfg.edgeToken}, true},
		{"fallback", diffTarget{name: "fallback", base: edge(4), token: cfg.edgeToken}, true},
	}
	sends := pathsSends()
	observed := map[string][]pathsObservation{}
	for _, cell := range cells {
		t0 := time.Now()
		direct := cell.name == "direct"
		if cell.name == "fallback" {
			fbEdge.SetTarget("") // NATS unreachable for this edge
		}
		nonces := make([]string, len(sends))
		replies := make([]sentReply, len(sends))
		for i, s := range sends {
			if direct && s.edgeOnly {
				continue
			}
			nonces[i] = newNonce(t)
			req := s.request(direct, nonces[i])
			replies[i] = sendOne(t, cell.target, req, nonces[i])
			for try := 0; try < admissionRetries && (notAdmitted(replies[i]) || cell.spooled && replies[i].status == http.StatusServiceUnavailable); try++ {
				// a busy gateway's admission timeout (sync), a queue that
				// could not take the event (503: nothing stored): again
				t.Logf("%s %s: %d %s; again", cell.name, s.name, replies[i].status, replies[i].body)
				time.Sleep(time.Second)
				replies[i] = sendOne(t, cell.target, req, nonces[i])
			}
			if replies[i].status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", cell.name, s.name, replies[i].status, replies[i].body)
			}
		}
		if cell.name == "fallback" {
			// the fallback spool holds every event (only this edge falls
			// back: the queue edge refuses instead); none can reach the
			// gateway while the edge is cut off
			if n := adminMetric(t, adminSock, "caddy_hooks_cluster_fallbacks_total"); n != float64(len(sends)) {
				t.Errorf("caddy_hooks_cluster_fallbacks_total = %v, want %d (one event per request)", n, len(sends))
			}
			for i := range sends {
				if obs, _ := observePaths(gw, stub, sends[i], nonces[i]); len(obs.Runs) != 0 || len(obs.Wakes) != 0 {
					t.Fatalf("fallback %s reached the gateway while the edge was cut off from NATS: %+v", sends[i].name, obs)
				}
			}
			fbEdge.SetTarget(nats.Addr())
		}
		var prompts [][]string
		observed[cell.name], prompts = settlePaths(t, gw, stub, cell.name, sends, nonces)
		for i, s := range sends {
			if nonces[i] == "" {
				continue
			}
			if diff := checkPathsReply(s, cell.spooled, replies[i], prompts[i]); diff != "" {
				t.Errorf("%s %s: %s", cell.name, s.name, diff)
			}
		}
		t.Logf("%s: %d requests sent and settled in %v", cell.name, len(sends), time.Since(t0).Round(time.Millisecond))
	}

	var table strings.Builder
	fmt.Fprintf(&table, "%-10s", "path")
	for _, s := range sends {
		fmt.Fprintf(&table, " %-14s", s.name)
	}
	for _, cell := range cells[1:] {
		fmt.Fprintf(&table, "\n%-10s", cell.name)
		for i, s := range sends {
			ref, res := "direct", "= direct"
			if s.edgeOnly {
				ref, res = "sync", "= sync"
				if cell.name == "sync" {
					fmt.Fprintf(&table, " %-14s", "(reference)")
					continue
				}
			}
			got, want := observed[cell.name][i], observed[ref][i]
			if cell.spooled && s.edgeKey {
				got = withoutEdgeKey(got)
			}
			if !reflect.DeepEqual(got, want) {
				res = "DIFFERS"
				g, _ := json.MarshalIndent(got, "", "  ")
				w, _ := json.MarshalIndent(want, "", "  ")
				t.Errorf("%s %s: the gateway's agent received\n%s\nwant (as %s)\n%s", cell.name, s.name, g, ref, w)
			}
			fmt.Fprintf(&table, " %-14s", res)
		}
	}
	t.Logf("forward mode, the real gateway, each path against the direct requests (%v in all):\n%s", time.Since(start).Round(time.Second), table.String())
}

// observePaths is what the gateway did with send s that carried nonce:
// its finished runs (the gateway's record and the model's prompt,
// normalised) and, for a wake, the heartbeat lines holding the nonce. The
// runs' prompts as the model received them come second.
func observePaths(gw *openclawGateway, stub *modelStub, s pathsSend, nonce string) (pathsObservation, []string) {
	runs, _ := readHookRuns(gw.fileLogPath())
	calls := stub.snapshot()
	var o pathsObservation
	var raw []string
	for _, rec := range runs {
		for _, c := range calls {
			i := slices.IndexFunc(c.User, func(u string) bool { return strings.Contains(u, "Job ID: "+rec.JobID) && strings.Contains(u, nonce) })
			if i >= 0 {
				o.Runs = append(o.Runs, newNormaliser().run(rec, calls))
				raw = append(raw, c.User[i])
				break
			}
		}
	}
	slices.SortFunc(o.Runs, func(a, b runObservation) int { return strings.Compare(a.Prompt+a.SessionKey, b.Prompt+b.SessionKey) })
	if !s.wake {
		return o, raw
	}
	seen := map[string]bool{}
	for _, c := range calls {
		for _, line := range eventLines(c.text()) {
			if strings.Contains(line, nonce) && !seen[line] {
				seen[line] = true
				o.Wakes = append(o.Wakes, newNormaliser().text(line))
			}
		}
	}
	slices.Sort(o.Wakes)
	return o, raw
}

// settlePaths waits until every send of a cell has started what it must
// (its runs finished, its wake seen by the model) and returns what each
// did, and the prompts of its runs.
//
// A wake the gateway answers "queued" waits for its next heartbeat, which
// can be half a minute away when runs keep the main session busy (the
// gateway's own scheduling: the wake reached it at once).
func settlePaths(t *testing.T, gw *openclawGateway, stub *modelStub, cell string, sends []pathsSend, nonces []string) ([]pathsObservation, [][]string) {
	t.Helper()
	out, raw := make([]pathsObservation, len(sends)), make([][]string, len(sends))
	start := time.Now()
	deadline := start.Add(settleTimeout)
	done := make([]time.Duration, len(sends))
	for {
		missing := []string{}
		for i, s := range sends {
			if nonces[i] == "" {
				continue // not sent on this path
			}
			out[i], raw[i] = observePaths(gw, stub, s, nonces[i])
			if len(out[i].Runs) < s.runs || s.wake && len(out[i].Wakes) == 0 {
				missing = append(missing, s.name)
			} else if done[i] == 0 {
				done[i] = time.Since(start)
			}
		}
		if len(missing) == 0 {
			var took []string
			for i, s := range sends {
				if nonces[i] != "" {
					took = append(took, fmt.Sprintf("%s %v", s.name, done[i].Round(100*time.Millisecond)))
				}
			}
			t.Logf("%s: settled (%s)", cell, strings.Join(took, ", "))
			return out, raw
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after %v the gateway has not finished %v", cell, settleTimeout, missing)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// edgeKeyRE finds an Idempotency-Key in the dump mapping's prompt (a
// JSON object of the headers, names sorted: never the first, which is
// accept-encoding or authorization).
var edgeKeyRE = regexp.MustCompile(`,"idempotency-key":"(<uuid>|[0-9a-f-]{36})"`)

// withoutEdgeKey is o without the Idempotency-Key header a spooled
// request gets when the sender gave none.
func withoutEdgeKey(o pathsObservation) pathsObservation {
	c := pathsObservation{Wakes: o.Wakes}
	for _, r := range o.Runs {
		r.Prompt = edgeKeyRE.ReplaceAllString(r.Prompt, "")
		c.Runs = append(c.Runs, r)
	}
	return c
}

// checkPathsReply checks the sender's answer: the gateway's own through
// the sync path (a runId, a wake's outcome), the event id once spooled
// (which the gateway gets as Idempotency-Key when the sender gave none).
func checkPathsReply(s pathsSend, spooled bool, r sentReply, prompts []string) string {
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		return fmt.Sprintf("reply %q: %v", r.body, err)
	}
	runID, _ := got["runId"].(string)
	switch {
	case !spooled && s.wake:
		if got["ok"] != true || got["eventOutcome"] == nil {
			return fmt.Sprintf("reply %s: want the gateway's wake reply", r.body)
		}
	case !spooled:
		if got["ok"] != true || !uuidPattern.MatchString(runID) {
			return fmt.Sprintf("reply %s: want the gateway's runId", r.body)
		}
	case s.wake:
		if !reflect.DeepEqual(got, map[string]any{"ok": true, "mode": "now"}) {
			return fmt.Sprintf("reply %s: want {\"ok\":true,\"mode\":\"now\"}", r.body)
		}
	default:
		if len(got) != 2 || got["ok"] != true || !uuidPattern.MatchString(runID) {
			return fmt.Sprintf("reply %s: want {\"ok\":true,\"runId\":<event id>}", r.body)
		}
		if s.edgeKey {
			if len(prompts) != 1 || !strings.Contains(prompts[0], `,"idempotency-key":"`+runID+`"`) {
				return fmt.Sprintf("the gateway's mapping saw no Idempotency-Key %s (the event id): %q", runID, prompts)
			}
		}
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" && r.header.Get("Server") == "Caddy" {
		return "the edge's answer lacks X-Content-Type-Options: nosniff"
	}
	return ""
}

// adminMetric reads a metric without labels from Caddy's admin endpoint
// on the Unix socket sock.
func adminMetric(t *testing.T, sock, name string) float64 {
	t.Helper()
	resp, err := adminClient(sock).Get("http://admin/metrics")
	if err != nil {
		t.Fatalf("admin /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	t.Fatalf("admin /metrics: no %s", name)
	return 0
}
