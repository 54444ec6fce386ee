//go:build openclaw

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The dispatch paths of TestDifferential (issue 35, item 10): the cases
// marked allPaths go, besides the imported edge as it is (sync), through
// the same edge with a local spool and with `spool cluster`, and what the
// agent received each time is compared with the direct request. A
// spooled request is answered once it is stored (the reply's runId is
// the event id, a wake's reply names its mode: README "Two modes"), so
// the comparison is what the README promises equal: the status, a
// refusal's answer, and every run and heartbeat line the request started
// (found by its nonce), not the accepted reply's ids.

// Secrets and settings of the spooled edges.
const (
	diffClusterKey = "e2e-diff-cluster-signing-key-6b5a4c3d2e1f0a9b"
	// the spools retry fast, so that a dead letter after the default
	// max_identical_errors (10) comes within the test's patience
	diffSpoolRetry = "\t\t\tretry_initial 200ms\n\t\t\tretry_max 2s\n"
)

// withHooksLines is the imported Caddyfile with lines added at the top of
// its hooks block (the only change the spooled edges make to it).
func withHooksLines(t *testing.T, caddyfile, lines string) string {
	t.Helper()
	i := strings.Index(caddyfile, "\thooks /")
	j := strings.Index(caddyfile[max(i, 0):], "{\n")
	if i < 0 || j < 0 {
		t.Fatalf("no hooks block in the imported Caddyfile:\n%s", caddyfile)
	}
	at := i + j + 2
	return caddyfile[:at] + lines + caddyfile[at:]
}

// spoolLines and clusterLines are the hooks lines of the spooled edges.
func spoolLines(dir string) string {
	return "\t\tspool " + dir + " {\n" + diffSpoolRetry + "\t\t}\n"
}

func clusterLines(url string) string {
	return "\t\tcluster nats " + url + " {\n\t\t\tname e2e-diff\n\t\t\ttimeout 5s\n\t\t\tack_wait 30s\n\t\t\tsigning_key " + diffClusterKey +
		"\n\t\t}\n\t\tspool cluster {\n\t\t\tfallback reject\n" + diffSpoolRetry + "\t\t}\n"
}

// agentView is what one send produced that the agent (or the sender's
// status) can tell: the status, a refusal's answer, the runs and the
// heartbeat lines of its nonce.
type agentView struct {
	Status int              `json:"status"`
	Reply  string           `json:"reply,omitempty"` // a refusal's, normalised
	Runs   []runObservation `json:"runs,omitempty"`
	Wakes  []string         `json:"wakes,omitempty"`
}

// viewOf is the agent view of the sends of one case.
func viewOf(gw *openclawGateway, stub *modelStub, sent []sentReply) []agentView {
	return viewOfPath(gw, stub, sent, false)
}

// viewOfPath is viewOf; spooled: the Idempotency-Key a spooled request
// without one gets (the event id, README "Two modes") is left out of the
// prompts that show the headers.
func viewOfPath(gw *openclawGateway, stub *modelStub, sent []sentReply, spooled bool) []agentView {
	out := make([]agentView, len(sent))
	for i, r := range sent {
		v := agentView{Status: r.status}
		if r.status/100 != 2 {
			v.Reply = newNormaliser().reply(r)
		}
		o, _ := observePaths(gw, stub, pathsSend{wake: true}, r.nonce)
		if spooled {
			o = withoutEdgeKey(o)
			for i, w := range o.Wakes {
				o.Wakes[i] = edgeKeyRE.ReplaceAllString(w, "")
			}
		}
		v.Runs, v.Wakes = o.Runs, o.Wakes
		out[i] = v
	}
	return out
}

// pathAllowance is a difference a spooled path may show for a case: ok
// says whether the views are the documented one.
type pathAllowance struct {
	ok     func(direct, edge []agentView) bool
	reason string
}

// spooledAllow lists, by path ("spool", "cluster") and case, the
// differences the README documents (docs/openclaw.md, "Differences").
var spooledAllow = map[string]map[string]pathAllowance{
	"cluster": {
		"D29 gmail body over 1 MiB": {
			ok: func(_, e []agentView) bool {
				return len(e) == 1 && e[0].Status == http.StatusRequestEntityTooLarge && strings.Contains(e[0].Reply, "max_payload") && len(e[0].Runs) == 0
			},
			reason: "spool cluster: a body over the NATS servers' max_payload (1 MiB by default) is refused with 413 naming max_payload (raise max_payload to take it)",
		},
	},
}

// syncAllowedEverywhere: a case whose sync-path difference (differentialAllow)
// is decided before the dispatch path, so that every path shows it.
var syncAllowedEverywhere = []string{
	"D24 unclosed deep nesting",
	"D32 valid x-openclaw-token, wrong x-service-token",
	"tokens: valid bearer, wrong x-openclaw",
	"tokens: bearer twice, valid and wrong",
	"B13 identity headers",
}

// spooledPhase sends the allPaths cases to tg (an edge with a spool) and
// returns their agent views, once every run and heartbeat line the
// direct requests started has its counterpart (or settleTimeout passed).
func spooledPhase(t *testing.T, name string, tg diffTarget, gw *openclawGateway, stub *modelStub, cases []diffCase, direct [][]agentView) [][]agentView {
	t.Helper()
	t0 := time.Now()
	sent := make([][]sentReply, len(cases))
	for i, c := range cases {
		if !c.allPaths {
			continue
		}
		for _, s := range c.sends {
			nonce := newNonce(t)
			for range max(s.repeat, 1) {
				r := sendOne(t, tg, s, nonce)
				for try := 0; try < admissionRetries && r.status == http.StatusServiceUnavailable; try++ {
					t.Logf("%s %s: %d %s; again", name, c.name, r.status, r.body)
					time.Sleep(time.Second)
					r = sendOne(t, tg, s, nonce)
				}
				sent[i] = append(sent[i], r)
			}
		}
	}
	out := make([][]agentView, len(cases))
	deadline := time.Now().Add(settleTimeout)
	for {
		missing := 0
		for i, c := range cases {
			if !c.allPaths {
				continue
			}
			out[i] = viewOfPath(gw, stub, sent[i], true)
			for j := range out[i] {
				if j < len(direct[i]) && out[i][j].Status/100 == 2 &&
					(len(out[i][j].Runs) < len(direct[i][j].Runs) || len(out[i][j].Wakes) < len(direct[i][j].Wakes)) {
					missing++
				}
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			t.Logf("%s phase: sent and settled in %v (%d sends not settled)", name, time.Since(t0).Round(time.Millisecond), missing)
			return out
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// compareSpooled reports the allPaths cases whose agent view through a
// spooled path differs from the direct one outside spooledAllow (and the
// sync allowances decided before the path), and the allowances unused.
func compareSpooled(path string, cases []diffCase, direct, edge [][]agentView, report *strings.Builder) (unexpected int) {
	if file := os.Getenv("CADDYHOOK_DIFF_REPORT"); file != "" {
		// every view, [gateway, edge] per case, for reading a difference
		// whose text the report cuts
		dump := map[string][2][]agentView{}
		for i, c := range cases {
			if c.allPaths {
				dump[c.name] = [2][]agentView{direct[i], edge[i]}
			}
		}
		data, _ := json.MarshalIndent(dump, "", "  ")
		_ = os.WriteFile(file+"."+path+".json", data, 0o644)
	}
	used := map[string]bool{}
	for i, c := range cases {
		if !c.allPaths {
			continue
		}
		if slices.Equal(marshalViews(direct[i]), marshalViews(edge[i])) {
			continue
		}
		if a, ok := spooledAllow[path][c.name]; ok && a.ok(direct[i], edge[i]) {
			used[c.name] = true
			fmt.Fprintf(report, "- [allowed] %s %s: %s\n", path, c.name, a.reason)
			continue
		}
		if slices.Contains(syncAllowedEverywhere, c.name) {
			fmt.Fprintf(report, "- [allowed] %s %s: as on the sync path\n", path, c.name)
			continue
		}
		unexpected++
		fmt.Fprintf(report, "- [UNEXPECTED] %s %s:\n    gateway: %s\n    edge:    %s\n", path, c.name,
			orAbsent(strings.Join(marshalViews(direct[i]), " ")), orAbsent(strings.Join(marshalViews(edge[i]), " ")))
	}
	for name := range spooledAllow[path] {
		if !used[name] {
			unexpected++
			fmt.Fprintf(report, "- [UNUSED ALLOWANCE] %s %s: no difference any more\n", path, name)
		}
	}
	return unexpected
}

func marshalViews(vs []agentView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	return out
}

// adminClient talks to an edge's admin endpoint on its Unix socket.
func adminClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

// adminDo sends an admin request and returns the status and body.
func adminDo(t *testing.T, sock, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://admin"+path, nil)
	resp, err := adminClient(sock).Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wakeOrderSends is how many wake-mapping requests checkWakeOrder sends.
const wakeOrderSends = 8

// checkWakeOrder (D31): requests to a wake mapping (the gateway's alert
// mapping, action wake) reach the agent in acceptance order. Through a
// spooled edge they are accepted while its delivery is paused, so that
// all of them wait in the spool and its delivery, not the sender, sets
// their order. It returns "" or what went wrong.
func checkWakeOrder(t *testing.T, tg diffTarget, adminSock string, gw *openclawGateway, stub *modelStub) string {
	t.Helper()
	if adminSock != "" {
		if code, body := adminDo(t, adminSock, http.MethodPost, "/hooks/spool/pause?path=/hooks"); code != http.StatusOK {
			return fmt.Sprintf("pause: %d %s", code, body)
		}
	}
	nonces := make([]string, wakeOrderSends)
	for i := range nonces {
		nonces[i] = newNonce(t)
		r := sendOne(t, tg, diffSend{sub: "/alert?sev=o" + fmt.Sprint(i+1), body: `{"nonce":"@N@","alert":{"name":"Order"}}`}, nonces[i])
		if r.status != http.StatusOK {
			return fmt.Sprintf("send %d: %d %s", i+1, r.status, r.body)
		}
	}
	if adminSock != "" {
		if code, body := adminDo(t, adminSock, http.MethodPost, "/hooks/spool/resume?path=/hooks"); code != http.StatusOK {
			return fmt.Sprintf("resume: %d %s", code, body)
		}
	}
	deadline := time.Now().Add(settleTimeout)
	for {
		// where each nonce first reached the model: the call, then the
		// place in the call's text
		type place struct{ call, at int }
		first := make([]place, len(nonces))
		seen := 0
		for ci, c := range stub.snapshot() {
			text := c.text()
			for i, n := range nonces {
				if first[i].call == 0 {
					if at := strings.Index(text, n); at >= 0 {
						first[i], seen = place{ci + 1, at}, seen+1
					}
				}
			}
		}
		if seen == len(nonces) {
			for i := 1; i < len(first); i++ {
				if first[i].call < first[i-1].call || first[i].call == first[i-1].call && first[i].at < first[i-1].at {
					return fmt.Sprintf("wake %d reached the agent before wake %d (%v)", i+1, i, first)
				}
			}
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("after %v, %d of %d wakes reached the agent", settleTimeout, seen, len(nonces))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkIdenticalDeadLetter (issue 35 item 9): through a spooled edge, a
// request whose transform always throws (the gateway's 500 "hook mapping
// failed") is accepted (the spool's 200) and, after max_identical_errors
// identical answers, a dead letter carrying the gateway's error, long
// before max_age. It returns "" or what went wrong.
func checkIdenticalDeadLetter(t *testing.T, tg diffTarget, adminSock string) string {
	t.Helper()
	nonce := newNonce(t)
	r := sendOne(t, tg, diffSend{sub: "/tx", body: `{"nonce":"@N@","boom":true}`}, nonce)
	if r.status != http.StatusOK {
		return fmt.Sprintf("accept: %d %s", r.status, r.body)
	}
	var rep struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(r.body, &rep)
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, dead := adminDo(t, adminSock, http.MethodGet, "/hooks/spool/dead?path=/hooks")
		if strings.Contains(dead, rep.RunID) {
			if !strings.Contains(dead, "hook mapping failed") || !strings.Contains(dead, "the same answer") {
				return "dead letter without the gateway's repeated error: " + dead
			}
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("event %s still retried after 90 s: dead letters %s", rep.RunID, dead)
		}
		time.Sleep(time.Second)
	}
}
