package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/listenguard"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// testAdmin talks to the test Caddy's admin endpoint on its Unix socket
// and remembers every answer, so a test can check that none carries a
// secret.
type testAdmin struct {
	t       *testing.T
	sock    string
	c       *http.Client
	answers []string
	in      *ingress
}

// startOpsIngress is startIngress with Caddy's admin endpoint on a Unix
// socket the test owns.
func startOpsIngress(t *testing.T, o ingressOpts) (*ingress, *testAdmin) {
	t.Helper()
	dir, err := os.MkdirTemp("", "adm") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "admin.sock")
	o.admin = "unix/" + sock
	in := startIngress(t, o)
	// runs before startIngress's cleanup: stops the admin endpoint too,
	// which caddy.Stop leaves running
	t.Cleanup(func() { _ = caddy.Load([]byte(`{"admin":{"disabled":true,"config":{"persist":false}}}`), true) })
	a := &testAdmin{t: t, sock: sock, in: in, c: &http.Client{Timeout: 15 * time.Second, Transport: adminTransport(sock)}}
	t.Cleanup(func() { a.checkNoSecrets() })
	return in, a
}

// adminTransport reaches the admin endpoint on the Unix socket sock, a
// connection per request, each made once the replaced admin server is
// gone. A config load, taken or refused, replaces the admin server and
// shuts the old one down in the background: a kept connection could be
// closed under a request sent on it (EOF for a replay POSTed right after
// a reload), and until the old server closes its copy of the socket's
// descriptor it takes new connections too, and closes one whose request
// it reads while shutting down unanswered (net/http; EOF for the events
// listed right after a refused reload in TestEventsSurviveReloadAndRestart).
func adminTransport(sock string) *http.Transport {
	return &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		for deadline := time.Now().Add(answerWithin); ; {
			n, ok := listenguard.UnixListenersOn(sock)
			if !ok || n <= 1 {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%d descriptors still listen on %s: the replaced admin server does not close its own", n, sock)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond): // poll interval
			}
		}
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
}

// do sends an admin request and returns the status and body.
func (a *testAdmin) do(method, path, body string) (int, string) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://127.0.0.1"+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(path, adminapi.Prefix) { // Caddy's own /config/ shows the config as loaded
		a.answers = append(a.answers, string(b))
	}
	return resp.StatusCode, string(b)
}

// call sends an admin request, demands status want and decodes the answer
// into into (unless nil).
func (a *testAdmin) call(method, path, body string, want int, into any) string {
	a.t.Helper()
	status, ans := a.do(method, path, body)
	if status != want {
		a.t.Fatalf("admin %s %s: %d %s, want %d", method, path, status, ans, want)
	}
	if into != nil {
		if err := json.Unmarshal([]byte(ans), into); err != nil {
			a.t.Fatalf("admin %s %s: %v in %s", method, path, err, ans)
		}
	}
	return ans
}

// status returns GET /hooks/?path=… for one handler.
func (a *testAdmin) status(query string) adminapi.HandlerStatus {
	a.t.Helper()
	var sts []adminapi.HandlerStatus
	a.call(http.MethodGet, "/hooks/"+query, "", http.StatusOK, &sts)
	if len(sts) != 1 {
		a.t.Fatalf("GET /hooks/%s: %d handlers, want 1", query, len(sts))
	}
	return sts[0]
}

// dead returns the dead letters of the only handler.
func (a *testAdmin) dead(query string) []adminapi.DeadLetter {
	a.t.Helper()
	var dl []adminapi.DeadLetter
	a.call(http.MethodGet, "/hooks/spool/dead"+query, "", http.StatusOK, &dl)
	return dl
}

// checkNoSecrets fails if any admin answer carried a test secret.
func (a *testAdmin) checkNoSecrets() {
	for _, ans := range a.answers {
		for _, secret := range []string{itHookToken, itGatewayToken} {
			if strings.Contains(ans, secret) {
				a.t.Errorf("an admin answer carries a secret: %s", ans)
			}
		}
	}
}

// config returns the running config as JSON.
func (a *testAdmin) config() map[string]any {
	a.t.Helper()
	var cfg map[string]any
	a.call(http.MethodGet, "/config/", "", http.StatusOK, &cfg)
	return cfg
}

// load posts cfg to /load and returns the status and answer. The test
// client then drops its idle connections, which the replaced server
// closes.
func (a *testAdmin) load(cfg map[string]any) (int, string) {
	a.t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	status, ans := a.do(http.MethodPost, "/load", string(b))
	if status == http.StatusOK { // the new config listens on a new port
		a.in.base = "http://" + firstListenAddr(a.t)
		a.in.waitOldListenerClosed()
	}
	a.in.client.CloseIdleConnections()
	return status, ans
}

// editHooks finds the handle list holding the hooks handler in cfg and
// replaces it with edit's result (given the list and the handler's index).
func editHooks(t *testing.T, cfg map[string]any, edit func(list []any, i int) []any) {
	t.Helper()
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if list, ok := child.([]any); ok && k == "handle" {
					for i, hv := range list {
						if hm, ok := hv.(map[string]any); ok && hm["handler"] == "hooks" {
							v[k] = edit(list, i)
							return true
						}
					}
				}
				if walk(child) {
					return true
				}
			}
		case []any:
			for _, child := range v {
				if walk(child) {
					return true
				}
			}
		}
		return false
	}
	if !walk(cfg) {
		t.Fatal("no hooks handler in the running config")
	}
}

// withSecondHandler returns a copy of the hooks handler serving base with
// extra fields, inserted after it.
func withSecondHandler(base string, extra map[string]any) func(list []any, i int) []any {
	return func(list []any, i int) []any {
		second := map[string]any{}
		for k, v := range list[i].(map[string]any) {
			if k != "spool" {
				second[k] = v
			}
		}
		second["path"] = base
		for k, v := range extra {
			second[k] = v
		}
		return slices.Insert(list, i+1, any(second))
	}
}

// postAfterReload sends an authenticated POST right after a config reload.
// Until the replaced server has finished shutting down (Caddy starts that
// before the reload returns, the scheduler finishes it), a new connection
// may still reach it and be closed unanswered; the request is then sent
// again with the same Idempotency-Key, as a sender would, so that it is
// dispatched at most once either way.
func (in *ingress) postAfterReload(path, body string, hdr ...string) result {
	in.t.Helper()
	hdr = append([]string{"Idempotency-Key: " + uuid.NewString()}, hdr...)
	var last error
	for range 5 {
		req, err := http.NewRequest(http.MethodPost, in.base+path, strings.NewReader(body))
		if err != nil {
			in.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+itHookToken)
		for _, h := range hdr {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		resp, err := in.client.Do(req)
		if err != nil {
			last = err
			in.client.CloseIdleConnections()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	in.t.Fatalf("POST %s after the reload: %v", path, last)
	return result{}
}

// postTraced sends an authenticated POST carrying a trace context.
func (in *ingress) postTraced(path, body, parent, state string) result {
	in.t.Helper()
	return in.post(path, body, "traceparent: "+parent, "tracestate: "+state)
}

// traceParentFor builds a valid traceparent whose trace id ends in n.
func traceParentFor(n int) string {
	return fmt.Sprintf("00-%032x-%016x-01", 0xabc000+n, 0x5150+n)
}

func TestAdminSelectionAndStatus(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + t.TempDir() + ` {
			rate 50/1m
		}`})
	st := adm.status("")
	if st.Path != "/hooks" || st.Spool == nil || st.Spool.Rate != "50/1m0s" || st.Spool.Paused || st.Spool.MaxBytes != 1<<30 {
		t.Fatalf("status %+v (spool %+v)", st, st.Spool)
	}
	if r := in.post("/hooks/agent", `{"message":"m"}`, "Idempotency-Key: k1"); r.status != 200 {
		t.Fatalf("agent: %d %s", r.status, r.body)
	}
	if st := adm.status("?path=/hooks/"); st.IdempotencyEntries != 1 {
		t.Fatalf("idempotency entries %d, want 1", st.IdempotencyEntries)
	}

	// a second handler, without a spool, through the admin API's /load
	cfg := adm.config()
	editHooks(t, cfg, withSecondHandler("/ops2", nil))
	if status, ans := adm.load(cfg); status != http.StatusOK {
		t.Fatalf("load with a second handler: %d %s", status, ans)
	}
	var all []adminapi.HandlerStatus
	adm.call(http.MethodGet, "/hooks/", "", http.StatusOK, &all)
	if len(all) != 2 || all[0].Path != "/hooks" || all[1].Path != "/ops2" || all[1].Spool != nil || all[0].Spool == nil {
		t.Fatalf("GET /hooks/ after the reload: %+v", all)
	}
	tests := []struct {
		method, path string
		want         int
		wantIn       string
	}{
		{http.MethodGet, "/hooks/lockouts", 400, "path=/hooks"},
		{http.MethodGet, "/hooks/lockouts", 400, "path=/ops2"},
		{http.MethodGet, "/hooks/lockouts?path=/ops2", 200, "[]"},
		{http.MethodGet, "/hooks/lockouts?path=/nope", 404, "path=/ops2"},
		{http.MethodGet, "/hooks/spool/dead?path=/ops2", 404, "has no spool"},
		{http.MethodPost, "/hooks/spool/pause?path=/ops2", 404, "has no spool"},
		{http.MethodGet, "/hooks/spool/dead?path=/hooks", 200, "[]"},
		{http.MethodPost, "/hooks/spool/dead?path=/hooks", 405, "use GET"},
		{http.MethodGet, "/hooks/spool/pause?path=/hooks", 405, "use POST"},
		{http.MethodGet, "/hooks/nothing", 404, "no such hooks admin endpoint"},
		{http.MethodGet, "/hooks/lockouts?path=/hooks&limit=0", 400, "limit"},
		{http.MethodPost, "/hooks/spool/dead/retry?path=/hooks", 400, "ids"},
		{http.MethodPost, "/hooks/spool/dead/drop?path=/hooks", 400, "ids"},
	}
	for _, tt := range tests {
		body := ""
		if tt.method == http.MethodPost {
			body = "{}"
		}
		status, ans := adm.do(tt.method, tt.path, body)
		if status != tt.want || !strings.Contains(ans, tt.wantIn) {
			t.Errorf("%s %s: %d %s, want %d containing %q", tt.method, tt.path, status, ans, tt.want, tt.wantIn)
		}
	}
	for _, body := range []string{`{"ids":["a"],"all":true}`, `{"ids":[]}`, `{"all":false}`, `{"id":"x"}`, `not json`} {
		if status, ans := adm.do(http.MethodPost, "/hooks/spool/dead/retry?path=/hooks", body); status != 400 {
			t.Errorf("retry with %s: %d %s, want 400", body, status, ans)
		}
	}
}

func TestAdminLockoutLift(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: `auth_failures 3 1m`})
	bad := "Authorization: Bearer " + strings.Repeat("x", 40)
	for range 3 {
		if r := in.do(http.MethodPost, "/hooks/wake", `{"text":"x"}`, bad); r.status != 401 {
			t.Fatalf("wrong token: %d", r.status)
		}
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 429 {
		t.Fatalf("valid token from a locked address: %d, want 429", r.status)
	}
	var locks []adminapi.Lockout
	adm.call(http.MethodGet, "/hooks/lockouts", "", http.StatusOK, &locks)
	if len(locks) != 1 || locks[0].Address != "127.0.0.1" || !locks[0].Until.After(time.Now()) || locks[0].Until.After(time.Now().Add(2*time.Minute)) {
		t.Fatalf("lockouts %+v, want 127.0.0.1 until within the window", locks)
	}
	if st := adm.status(""); st.ActiveLockouts != 1 {
		t.Fatalf("active lockouts %d", st.ActiveLockouts)
	}
	adm.call(http.MethodDelete, "/hooks/lockouts/203.0.113.9", "", http.StatusNotFound, nil)
	adm.call(http.MethodDelete, "/hooks/lockouts/not-an-ip", "", http.StatusBadRequest, nil)
	if ans := adm.call(http.MethodDelete, "/hooks/lockouts/127.0.0.1", "", http.StatusOK, nil); !strings.Contains(ans, `"lifted":"127.0.0.1"`) {
		t.Fatalf("lift answer %s", ans)
	}
	if r := in.post("/hooks/wake", `{"text":"after the lift"}`); r.status != 200 {
		t.Fatalf("valid request after the lift: %d %s, want 200", r.status, r.body)
	}
	adm.call(http.MethodDelete, "/hooks/lockouts/127.0.0.1", "", http.StatusNotFound, nil)
	adm.call(http.MethodGet, "/hooks/lockouts", "", http.StatusOK, &locks)
	if len(locks) != 0 {
		t.Fatalf("lockouts after the lift %+v", locks)
	}
}

// TestAdminDeadLettersRetryAndDrop: a gateway that stays down past max_age
// leaves dead letters; retried after it is back they are delivered, with
// their trace context; drop deletes the rest.
func TestAdminDeadLettersRetryAndDrop(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{noGW: true, hooks: `spool ` + t.TempDir() + ` {
			max_age 2s
			retry_initial 50ms
			retry_max 200ms
		}`})
	const n = 4
	state := "vendor=opaque-value"
	ids := map[string]int{}
	for i := range n {
		r := in.postTraced("/hooks/agent", fmt.Sprintf(`{"message":"dead %d"}`, i), traceParentFor(i), state)
		if r.status != 200 {
			t.Fatalf("accept %d: %d %s", i, r.status, r.body)
		}
		ids[r.json(t)["runId"].(string)] = i
	}
	var dead []adminapi.DeadLetter
	testkit.WaitForState(t, func() string {
		return fmt.Sprintf("%d of %d dead letters after the gateway stayed down past max_age", len(dead), n)
	},
		func() bool { dead = adm.dead(""); return len(dead) >= n })
	for _, d := range dead {
		i, ok := ids[d.ID]
		if !ok || d.Kind != "agent" || d.Path != "/hooks/agent" || !strings.Contains(d.Reason, "expired") ||
			d.BodyBytes == 0 || d.Body != nil || d.TraceParent != traceParentFor(i) {
			t.Fatalf("dead letter %+v", d)
		}
	}
	withBody := adm.dead("?body=1")
	if b, _ := json.Marshal(withBody[0].Body); !strings.Contains(string(b), "dead ") || !strings.Contains(string(b), "EXTERNAL_UNTRUSTED_CONTENT") {
		t.Fatalf("dead letter body %s", b)
	}
	if st := adm.status(""); st.Spool.DeadLetters != n || st.Spool.Depth != 0 {
		t.Fatalf("spool status %+v", st.Spool)
	}

	in.startGateway()
	first := dead[0].ID
	var retried map[string]int
	adm.call(http.MethodPost, "/hooks/spool/dead/retry", `{"ids":["`+first+`","unknown-id"]}`, http.StatusOK, &retried)
	if retried["retried"] != 1 {
		t.Fatalf("retry one: %v", retried)
	}
	adm.call(http.MethodPost, "/hooks/spool/dead/retry", `{"all":true}`, http.StatusOK, &retried)
	if retried["retried"] != n-1 {
		t.Fatalf("retry all: %v, want %d", retried, n-1)
	}
	awaitSpoolDrain(t, in, n)
	seen := map[string]bool{}
	for _, r := range in.gw.Received() {
		i, ok := ids[r.IdempotencyKey]
		if !ok || r.Status != 200 {
			continue
		}
		seen[r.IdempotencyKey] = true
		if r.TraceParent != traceParentFor(i) || r.TraceState != state {
			t.Errorf("retried event %d reached the gateway with traceparent %q tracestate %q", i, r.TraceParent, r.TraceState)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d retried dead letters delivered", len(seen), n)
	}
	if st := adm.status(""); st.Spool.DeadLetters != 0 {
		t.Fatalf("dead letters after retry: %d", st.Spool.DeadLetters)
	}

	// drop: the gateway refuses for good (4xx) → dead letters, dropped
	in.gw.FailWith(func(string) int { return http.StatusUnprocessableEntity })
	for i := range 3 {
		if r := in.post("/hooks/agent", fmt.Sprintf(`{"message":"refused %d"}`, i)); r.status != 200 {
			t.Fatalf("accept: %d", r.status)
		}
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("%d of 3 refused events dead-lettered", len(dead)) },
		func() bool { dead = adm.dead(""); return len(dead) == 3 })
	if !strings.Contains(dead[0].Reason, "gateway status 422") {
		t.Fatalf("reason %q", dead[0].Reason)
	}
	var dropped map[string]int
	adm.call(http.MethodPost, "/hooks/spool/dead/drop", `{"ids":["`+dead[0].ID+`"]}`, http.StatusOK, &dropped)
	if dropped["dropped"] != 1 || len(adm.dead("")) != 2 {
		t.Fatalf("drop one: %v", dropped)
	}
	adm.call(http.MethodPost, "/hooks/spool/dead/drop", `{"all":true}`, http.StatusOK, &dropped)
	if dropped["dropped"] != 2 || len(adm.dead("")) != 0 {
		t.Fatalf("drop all: %v", dropped)
	}
}

// TestAdminPauseResumeAcrossReloads: paused, events are accepted but not
// delivered; a refused reload and an accepted one keep the paused state
// and the spool; resumed, they are delivered in order.
func TestAdminPauseResumeAcrossReloads(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + t.TempDir()})
	var paused map[string]bool
	adm.call(http.MethodPost, "/hooks/spool/pause", "", http.StatusOK, &paused)
	if !paused["paused"] {
		t.Fatalf("pause answer %v", paused)
	}
	const n = 6
	for i := range n {
		if r := in.postTraced("/hooks/wake", fmt.Sprintf(`{"text":"wake %d"}`, i), traceParentFor(i), "k=v"); r.status != 200 {
			t.Fatalf("wake %d while paused: %d %s", i, r.status, r.body)
		}
	}
	st := adm.status("")
	if !st.Spool.Paused || st.Spool.Depth != n || in.gw.Count("") != 0 {
		t.Fatalf("while paused: spool %+v, gateway received %d", st.Spool, in.gw.Count(""))
	}

	// refused: a second handler whose token is too short
	cfg := adm.config()
	editHooks(t, cfg, withSecondHandler("/bad", map[string]any{"token": "short"}))
	if status, ans := adm.load(cfg); status < 400 || !strings.Contains(ans, "token") {
		t.Fatalf("load of a bad config: %d %s, want refused naming the token", status, ans)
	}
	if st := adm.status(""); !st.Spool.Paused || st.Spool.Depth != n || st.Path != "/hooks" {
		t.Fatalf("after the refused reload: %+v (spool %+v)", st, st.Spool)
	}
	// accepted: a changed gateway timeout
	cfg = adm.config()
	editHooks(t, cfg, func(list []any, i int) []any {
		list[i].(map[string]any)["gateway_timeout"] = "7s"
		return list
	})
	if status, ans := adm.load(cfg); status != http.StatusOK {
		t.Fatalf("load: %d %s", status, ans)
	}
	if st := adm.status(""); !st.Spool.Paused || st.Spool.Depth != n {
		t.Fatalf("after the accepted reload: spool %+v", st.Spool)
	}
	if r := in.postAfterReload("/hooks/wake", `{"text":"wake 6"}`); r.status != 200 {
		t.Fatalf("accept after the reload: %d", r.status)
	}
	if in.gw.Count("") != 0 {
		t.Fatalf("gateway received %d events while paused", in.gw.Count(""))
	}

	adm.call(http.MethodPost, "/hooks/spool/resume", "", http.StatusOK, &paused)
	if paused["paused"] {
		t.Fatalf("resume answer %v", paused)
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("%d of %d delivered after resume", in.gw.Count("wake"), n+1) },
		func() bool { return in.gw.Count("wake") >= n+1 })
	for i, r := range in.gw.Received() {
		if want := fmt.Sprintf("wake %d", i); r.Body["text"] != want {
			t.Fatalf("delivery %d is %v, want %s (acceptance order)", i, r.Body["text"], want)
		}
		if i < n && r.TraceParent != traceParentFor(i) {
			t.Fatalf("delivery %d traceparent %q, want %q", i, r.TraceParent, traceParentFor(i))
		}
	}
	// the gateway has the last event before the spool hears its answer
	testkit.WaitForState(t, func() string { return fmt.Sprintf("after resume: spool %+v", st.Spool) },
		func() bool { st = adm.status(""); return !st.Spool.Paused && st.Spool.Depth == 0 })
}

// TestSpoolRateHolds: with rate 5/s, a burst of 50 waits in the spool and
// reaches the gateway no faster than 5 a second. Only what a limiter
// guarantees is checked, so a slow machine cannot fail it: no more
// deliveries than the rate allows in the time that passed, and the burst
// spread over several seconds (delays only spread it further).
func TestSpoolRateHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s: 50 events at 5/s")
	}
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + t.TempDir() + ` {
			rate 5/s
			workers 8
		}`})
	const burst, perWindow, window = 50, 5, time.Second
	start := time.Now()
	load := postAgentsConcurrently(t, in, 0, burst, 16)
	if len(load.runIDs) != burst {
		t.Fatalf("%d of %d accepted", len(load.runIDs), burst)
	}
	// the burst waits in the spool: depth and oldest age show it; in the
	// time that passed, at most a window's worth per started window left
	st := adm.status("")
	windows := int(time.Since(start)/window) + 1
	m := spoolRegistryMetrics(t)
	if st.Spool.Depth < burst-perWindow*windows || st.Spool.Rate != "5/1s" || m["caddy_hooks_spool_depth"] == 0 {
		t.Fatalf("%v after the burst began: spool %+v, metrics %v", time.Since(start), st.Spool, m)
	}
	testkit.WaitForState(t, func() string { return "the oldest-age metric never showed the burst waiting" }, func() bool {
		m := spoolRegistryMetrics(t)
		return m["caddy_hooks_spool_oldest_age_seconds"] >= 1 && m["caddy_hooks_spool_depth"] > 0
	})
	awaitSpoolDrain(t, in, burst)
	checkDelivered(t, in, load.runIDs)

	var times []time.Time
	for _, r := range in.gw.Received() {
		times = append(times, r.Time)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < window {
			j++
		}
		most = max(most, j-i)
	}
	span := times[len(times)-1].Sub(times[0])
	// arrivals bunch when a loaded machine delays some deliveries, so the
	// busiest window is reported, not asserted
	t.Logf("%d deliveries over %v; at most %d in any %v window", len(times), span, most, window)
	if span < 5*time.Second {
		t.Fatalf("50 deliveries in %v at 5/s; want the burst spread over ~9 s", span)
	}
}

// TestTraceContextToGateway: the sender's W3C trace context reaches the
// gateway in sync mode; a malformed traceparent is not passed on.
func TestTraceContextToGateway(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	parent, state := traceParentFor(1), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	if r := in.postTraced("/hooks/agent", `{"message":"traced"}`, parent, state); r.status != 200 {
		t.Fatalf("agent: %d %s", r.status, r.body)
	}
	if r := in.postTraced("/hooks/wake", `{"text":"bad trace"}`, "00-"+strings.Repeat("0", 32)+"-00f067aa0ba902b7-01", state); r.status != 200 {
		t.Fatalf("wake: %d %s", r.status, r.body)
	}
	if r := in.post("/hooks/wake", `{"text":"untraced"}`); r.status != 200 {
		t.Fatalf("wake: %d", r.status)
	}
	got := in.gw.Received()
	if len(got) != 3 || got[0].TraceParent != parent || got[0].TraceState != state {
		t.Fatalf("traced request reached the gateway with %q %q", got[0].TraceParent, got[0].TraceState)
	}
	for _, r := range got[1:] {
		if r.TraceParent != "" || r.TraceState != "" {
			t.Fatalf("%v reached the gateway with trace context %q %q", r.Body["text"], r.TraceParent, r.TraceState)
		}
	}
}

// TestTraceContextCaddySpan: with Caddy's tracing handler in front, the
// gateway gets Caddy's own span: the sender's trace id, a new parent id.
func TestTraceContextCaddySpan(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	in, adm := startOpsIngress(t, ingressOpts{})
	cfg := adm.config()
	editHooks(t, cfg, func(list []any, i int) []any {
		return slices.Insert(list, i, any(map[string]any{"handler": "tracing", "span": "hooks"}))
	})
	if status, ans := adm.load(cfg); status != http.StatusOK {
		t.Fatalf("load with tracing: %d %s", status, ans)
	}
	parent := traceParentFor(7)
	if r := in.postAfterReload("/hooks/wake", `{"text":"t"}`, "traceparent: "+parent, "tracestate: k=v"); r.status != 200 {
		t.Fatalf("wake: %d %s", r.status, r.body)
	}
	if r := in.postAfterReload("/hooks/wake", `{"text":"t2"}`); r.status != 200 {
		t.Fatalf("wake: %d %s", r.status, r.body)
	}
	got := in.gw.Received()
	sent, fresh := got[0].TraceParent, got[1].TraceParent
	if !validTraceParent(sent) || sent[3:35] != parent[3:35] || sent[36:52] == parent[36:52] {
		t.Fatalf("gateway traceparent %q: want trace id of %q with Caddy's span id", sent, parent)
	}
	if !validTraceParent(fresh) || fresh[3:35] == parent[3:35] {
		t.Fatalf("untraced request: gateway traceparent %q, want a new trace from Caddy", fresh)
	}
}

// TestSpoolCommandThroughAdminAPI: `caddy hooks spool` works on a running
// Caddy's spool through the admin API, and prints the same as it does from
// the spool file once Caddy is stopped.
func TestSpoolCommandThroughAdminAPI(t *testing.T) {
	dir := t.TempDir()
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + dir})
	in.gw.FailWith(func(string) int { return http.StatusBadRequest })
	var ids []string
	for i := range 4 {
		r := in.postTraced("/hooks/agent", fmt.Sprintf(`{"message":"cli <%d> & more"}`, i), traceParentFor(i), "k=v")
		if r.status != 200 {
			t.Fatalf("accept: %d", r.status)
		}
		ids = append(ids, r.json(t)["runId"].(string))
	}
	testkit.WaitForState(t, func() string { return "dead letters not created" }, func() bool { return adm.status("").Spool.DeadLetters >= 4 })
	address := "unix/" + adm.sock
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runHooksCommand(append([]string{"spool"}, args...)...)
		if err != nil {
			t.Fatalf("spool %v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}

	in.gw.FailWith(nil)
	if out := run("retry", "--address", address, ids[0]); !strings.Contains(out, "requeued 1 dead letter(s) in "+dir+"; the running Caddy delivers them now") {
		t.Fatalf("live retry: %s", out)
	}
	testkit.WaitForState(t, func() string { return "the retried dead letter was not delivered" }, func() bool { return in.gw.DistinctKeys() >= 1 })
	if got := in.gw.Received(); got[len(got)-1].IdempotencyKey != ids[0] || got[len(got)-1].TraceParent != traceParentFor(0) {
		t.Fatalf("delivered %+v, want %s with its traceparent", got[len(got)-1], ids[0])
	}
	if out := run("drop", "--address", address, "--dir", dir, ids[1]); !strings.Contains(out, "dropped 1 dead letter(s) from "+dir) {
		t.Fatalf("live drop: %s", out)
	}
	live := run("list", "--address", address, "--base", "/hooks", "--body")
	for i, id := range ids {
		if strings.Contains(live, id) != (i >= 2) {
			t.Fatalf("live list (dead letters %v expected):\n%s", ids[2:], live)
		}
	}

	// stop Caddy: the same command reads the spool file
	if err := caddy.Load([]byte(`{"admin":{"disabled":true,"config":{"persist":false}}}`), true); err != nil {
		t.Fatal(err)
	}
	// Caddy shuts the old admin endpoint down in the background
	testkit.WaitForState(t, func() string { return "the admin endpoint still answers after Caddy stopped" }, func() bool {
		c, err := net.Dial("unix", adm.sock)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	offline := run("list", "--address", address, "--dir", dir, "--body")
	if offline != live {
		t.Fatalf("output differs\nthrough the admin API:\n%s\nfrom the file:\n%s", live, offline)
	}
	t.Logf("caddy hooks spool list --body:\n%s", live)
}

// metric returns the value of the sample line starting with series in the
// admin endpoint's /metrics (-1 when absent).
func (a *testAdmin) metric(series string) float64 {
	a.t.Helper()
	_, text := a.do(http.MethodGet, "/metrics", "")
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}

// TestMetricsSurviveReload: the hooks counters keep counting across an
// accepted config reload (each config has its own metrics registry).
func TestMetricsSurviveReload(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: "auth_failures 2 1m"})
	const ok, fails, locks = `caddy_hooks_requests_total{code="200",route="wake"}`, "caddy_hooks_auth_failures_total", "caddy_hooks_active_lockouts"
	for range 2 {
		if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 200 {
			t.Fatalf("wake: %d", r.status)
		}
	}
	for range 2 {
		in.do(http.MethodPost, "/hooks/wake", `{"text":"x"}`, "Authorization: Bearer "+strings.Repeat("y", 40))
	}
	if a, b, c := adm.metric(ok), adm.metric(fails), adm.metric(locks); a != 2 || b != 2 || c != 1 {
		t.Fatalf("before the reload: %s %v, %s %v, %s %v", ok, a, fails, b, locks, c)
	}
	cfg := adm.config()
	editHooks(t, cfg, func(list []any, i int) []any {
		list[i].(map[string]any)["gateway_timeout"] = "9s"
		return list
	})
	if status, ans := adm.load(cfg); status != http.StatusOK {
		t.Fatalf("load: %d %s", status, ans)
	}
	if a, b, c := adm.metric(ok), adm.metric(fails), adm.metric(locks); a != 2 || b != 2 || c != 1 {
		t.Fatalf("after the reload: %s %v, %s %v, %s %v; want the counts kept", ok, a, fails, b, locks, c)
	}
	adm.call(http.MethodDelete, "/hooks/lockouts/127.0.0.1", "", http.StatusOK, nil)
	if r := in.postAfterReload("/hooks/wake", `{"text":"x"}`); r.status != 200 {
		t.Fatalf("wake after the lift: %d", r.status)
	}
	if a, c := adm.metric(ok), adm.metric(locks); a != 3 || c != 0 {
		t.Fatalf("after one more request: %s %v, %s %v", ok, a, locks, c)
	}
}
