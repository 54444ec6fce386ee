package caddyhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/listenguard"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// Secrets used by the integration tests; the log checks look for them.
const (
	itHookToken    = "it-hook-token-4f1c2b9a7e6d5c3b2a190817f6e5d4c3"
	itGatewayToken = "it-gateway-token-9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
)

// ingress is a real Caddy server running the hooks module in this process,
// in front of a devgw gateway on a Unix socket.
type ingress struct {
	t       *testing.T
	base    string // http://127.0.0.1:port
	gw      *devgw.Gateway
	gwSrv   *http.Server
	sock    string
	dir     string
	file    string // the Caddyfile's name the adapter is given ("": <dir>/Caddyfile)
	logPath string
	client  *http.Client
	// reloaded is when a load last replaced a running config of this
	// ingress (zero before the first reload); see reloadRace.
	reloaded *atomic.Pointer[time.Time]
}

// reloadRace is an ingress client's transport: a request on a connection
// that the replaced server accepted just before it was stopped is dropped
// by net/http unanswered and unserved (conn.serve returns when its server
// is shutting down after reading the request, and Caddy's reload stops
// the old server while its listener is shared with the new one). Within
// answerWithin of a reload, such a request (EOF or reset before any
// answer) is sent once more on a new connection; nothing was served, so
// nothing is done twice. Everywhere else an error is the test's.
type reloadRace struct {
	reloaded *atomic.Pointer[time.Time] // the ingress's
	base     http.RoundTripper
}

// newIngressClient is an ingress's client and the time of its last
// reload, which tryLoad sets.
func newIngressClient(timeout time.Duration) (*http.Client, *atomic.Pointer[time.Time]) {
	reloaded := new(atomic.Pointer[time.Time])
	return &http.Client{Timeout: timeout, Transport: reloadRace{reloaded: reloaded, base: &http.Transport{}}}, reloaded
}

// RoundTrip implements http.RoundTripper.
func (rr reloadRace) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rr.base.RoundTrip(req)
	if err == nil || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		return resp, err
	}
	at := rr.reloaded.Load()
	if at == nil || time.Since(*at) > answerWithin || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	retry := req.Clone(req.Context())
	if req.GetBody != nil {
		b, gerr := req.GetBody()
		if gerr != nil {
			return resp, err
		}
		retry.Body = b
	}
	return rr.base.RoundTrip(retry)
}

// ingressOpts shapes the Caddyfile of a test ingress.
type ingressOpts struct {
	hooks   string // extra lines inside the hooks block
	global  string // extra lines inside the global options block
	gateway string // gateway address override ("" = the devgw socket)
	noGW    bool   // do not start the gateway
	admin   string // the admin endpoint, e.g. unix//path.sock ("" = off)
}

// startIngress starts a gateway and Caddy with the hooks module. Caddy
// listens on 127.0.0.1 only, on a port the kernel picks when the config is
// loaded (port 0), which in.base then names: no other process can hold or
// take that port, so parallel test binaries never race for one.
func startIngress(t *testing.T, o ingressOpts) *ingress {
	t.Helper()
	dir, err := os.MkdirTemp("", "chk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	in := &ingress{t: t, dir: dir, sock: filepath.Join(dir, "gw.sock"), logPath: filepath.Join(dir, "caddy.log")}
	in.client, in.reloaded = newIngressClient(15 * time.Second)
	in.gw = devgw.New(devgw.Config{Token: itGatewayToken, Record: true})
	if !o.noGW {
		in.startGateway()
	}
	gateway := o.gateway
	if gateway == "" {
		gateway = "unix/" + in.sock
	}
	admin := "off"
	if o.admin != "" {
		admin = o.admin
	}
	cf := fmt.Sprintf(`{
	admin %[8]s
	auto_https off
	persist_config off
	log {
		output file %[1]s
		format json
		level DEBUG
	}
	%[2]s
}
%[3]s {
	bind 127.0.0.1
	log {
		output file %[1]s
		format json
	}
	hooks {
		token %[4]s
		gateway %[5]s
		gateway_token %[6]s
		`+testTransformTimeout+`
		%[7]s
	}
	respond "next handler" 200
}
`, in.logPath, o.global, testSiteAddress, itHookToken, gateway, itGatewayToken, o.hooks, admin)
	t.Cleanup(func() {
		_ = caddy.Stop()
		if in.gwSrv != nil {
			_ = in.gwSrv.Close()
		}
	})
	in.load(cf)
	return in
}

// testTransformTimeout is the first line of the test hooks blocks: a
// transform budget no call reaches on a loaded machine (the default
// 100ms is not, under a busy CPU or the race detector). Tests about the
// budget set their own transform_timeout after it; the later line wins.
const testTransformTimeout = "transform_timeout 10s"

// testSiteAddress is the site address of every in-process test Caddyfile:
// plain HTTP on a port the kernel assigns when the config is loaded. Site
// blocks using it also need `bind 127.0.0.1`, or Caddy listens on every
// interface.
const testSiteAddress = "http://127.0.0.1:0"

// load adapts and runs a Caddyfile. On success in.base names the address
// Caddy listens on (a new port on every load when the config uses port 0);
// a refused config fails the test, see tryLoad.
func (in *ingress) load(cf string) {
	in.t.Helper()
	if err := in.tryLoad(cf); err != nil {
		in.t.Fatalf("load: %v", err)
	}
}

// tryLoad adapts and runs a Caddyfile and returns the adapter's or
// Caddy's error; when the config is refused, the running one (and
// in.base) stays. A config that is taken is the only one answering when
// tryLoad returns (see waitOldListenerClosed).
func (in *ingress) tryLoad(cf string) error {
	in.t.Helper()
	file := in.file
	if file == "" {
		file = filepath.Join(in.dir, "Caddyfile")
	}
	cfgJSON, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": file})
	if err != nil {
		return fmt.Errorf("adapt: %w (%v)", err, warn)
	}
	err = caddy.Load(cfgJSON, true)
	if err == nil {
		if in.base != "" && in.reloaded != nil {
			now := time.Now()
			in.reloaded.Store(&now)
		}
		in.base = "http://" + firstListenAddr(in.t)
		in.waitOldListenerClosed()
	}
	if in.client != nil {
		in.client.CloseIdleConnections()
	}
	return err
}

// listenAddrs returns the addresses the HTTP servers of the running
// in-process Caddy listen on, by server name. Read back after caddy.Load,
// they are how a test learns the ports the kernel assigned to `:0`.
func listenAddrs(tb testing.TB) map[string][]string {
	tb.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		tb.Fatalf("http app: %v", err)
	}
	out := map[string][]string{}
	for name, srv := range app.(*caddyhttp.App).Servers {
		for _, ln := range srv.Listeners() {
			out[name] = append(out[name], ln.Addr().String())
		}
	}
	return out
}

// firstListenAddr is the listener of a config with one server (or else
// the first listener of the first server by name).
func firstListenAddr(tb testing.TB) string {
	tb.Helper()
	addrs := listenAddrs(tb)
	names := slices.Sorted(maps.Keys(addrs))
	if len(names) == 0 || len(addrs[names[0]]) == 0 {
		tb.Fatal("the loaded config listens nowhere")
	}
	return addrs[names[0]][0]
}

// startGateway (re)starts the devgw on the socket.
func (in *ingress) startGateway() {
	in.t.Helper()
	ln, err := devgw.Listen("unix/" + in.sock)
	if err != nil {
		in.t.Fatal(err)
	}
	in.gwSrv = devgw.Server(in.gw)
	go func() { _ = in.gwSrv.Serve(ln) }()
}

// stopGateway stops the gateway and removes its socket.
func (in *ingress) stopGateway() {
	_ = in.gwSrv.Close()
	_ = os.Remove(in.sock)
}

// result is one answered request.
type result struct {
	status int
	header http.Header
	body   string
}

// json decodes the body as an object.
func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("reply %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request; hdr is "Name: value" pairs.
func (in *ingress) do(method, path, body string, hdr ...string) result {
	in.t.Helper()
	return in.doHost("", method, path, body, hdr...)
}

// doHost is do with the Host header host ("" = in.base's).
func (in *ingress) doHost(host, method, path, body string, hdr ...string) result {
	in.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, in.base+path, rd)
	if err != nil {
		in.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := in.client.Do(req)
	if err != nil {
		in.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// post sends an authenticated POST.
func (in *ingress) post(path, body string, hdr ...string) result {
	in.t.Helper()
	return in.do(http.MethodPost, path, body, append([]string{"Authorization: Bearer " + itHookToken}, hdr...)...)
}

// logs returns everything Caddy logged so far.
func (in *ingress) logs() string {
	b, _ := os.ReadFile(in.logPath)
	return string(b)
}

func TestIntegrationWakeAndAgent(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: `
		agents main ops
		allowed_agent_ids main ops
		allow_request_session_key
		allowed_session_key_prefixes hook:
		allowed_models openai/gpt-4o`})

	r := in.post("/hooks/wake", `{"text":"  disk almost full  ","mode":"next-heartbeat"}`)
	if r.status != 200 || r.json(t)["mode"] != "next-heartbeat" || r.json(t)["eventOutcome"] != "enqueued" {
		t.Fatalf("wake: %d %s", r.status, r.body)
	}
	r = in.do(http.MethodPost, "/hooks/agent", `{"message":"summarise the alert","agentId":"OPS","sessionKey":"HOOK:alerts","model":"openai/gpt-4o","deliver":false,"timeoutSeconds":90.7}`,
		"x-service-token: "+itHookToken)
	if r.status != 200 {
		t.Fatalf("agent: %d %s", r.status, r.body)
	}
	got := in.gw.Received()
	if len(got) != 2 {
		t.Fatalf("gateway received %d requests, want 2", len(got))
	}
	if want := map[string]any{"text": "disk almost full", "mode": "next-heartbeat"}; !jsonEqual(got[0].Body, want) {
		t.Errorf("wake body = %v, want %v", got[0].Body, want)
	}
	agent := got[1].Body
	if runID := r.json(t)["runId"]; runID != got[1].RunID {
		t.Errorf("runId %v is not the gateway's %v", runID, got[1].RunID)
	}
	for k, want := range map[string]any{"agentId": "ops", "sessionKey": "HOOK:alerts", "model": "openai/gpt-4o", "deliver": false, "timeoutSeconds": float64(90)} {
		if agent[k] != want {
			t.Errorf("agent body %s = %v, want %v", k, agent[k], want)
		}
	}
	for _, k := range []string{"channel", "to", "name", "wakeMode", "thinking"} {
		if _, ok := agent[k]; ok {
			t.Errorf("agent body carries defaulted %s: %v", k, agent[k])
		}
	}
	msg, _ := agent["message"].(string)
	if !strings.Contains(msg, "summarise the alert") || !strings.Contains(msg, "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"") || !strings.Contains(msg, "Source: Webhook") {
		t.Errorf("message not wrapped: %q", msg)
	}
	if got[0].IdempotencyKey == "" || got[1].IdempotencyKey == "" || got[0].IdempotencyKey == got[1].IdempotencyKey {
		t.Errorf("Idempotency-Keys %q %q: want distinct, non-empty", got[0].IdempotencyKey, got[1].IdempotencyKey)
	}
	if got[1].ForwardedFor != "" {
		t.Errorf("X-Forwarded-For sent while gateway_forward_client_ip is off: %q", got[1].ForwardedFor)
	}
}

func TestIntegrationRejections(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: `
		agents main ops
		allowed_agent_ids main
		allowed_models openai/gpt-4o
		max_body 1KiB`})
	auth := "Authorization: Bearer " + itHookToken
	big := `{"text":"` + strings.Repeat("x", 2000) + `"}`
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		want                     string
	}{
		{"query token", "POST", "/hooks/wake?token=" + itHookToken, `{"text":"x"}`, nil, 400, reasonQueryToken},
		{"query token even with header", "POST", "/hooks/wake?a=1&Token=x", `{"text":"x"}`, []string{auth}, 400, reasonQueryToken},
		{"GET", "GET", "/hooks/wake", "", []string{auth}, 405, ""},
		{"no token", "POST", "/hooks/wake", `{"text":"x"}`, nil, 401, ""},
		{"wrong token", "POST", "/hooks/wake", `{"text":"x"}`, []string{"Authorization: Bearer " + strings.Repeat("a", 48)}, 401, ""},
		{"basic scheme", "POST", "/hooks/wake", `{"text":"x"}`, []string{"Authorization: Basic " + itHookToken}, 401, ""},
		{"empty sub-path", "POST", "/hooks", `{"text":"x"}`, []string{auth}, 404, ""},
		{"unknown sub-path", "POST", "/hooks/nope", `{"text":"x"}`, []string{auth}, 404, ""},
		{"text/plain", "POST", "/hooks/wake", `{"text":"x"}`, []string{auth, "Content-Type: text/plain"}, 415, reasonContentType},
		{"too large", "POST", "/hooks/wake", big, []string{auth}, 413, reasonTooLarge},
		{"invalid JSON", "POST", "/hooks/wake", `{"text":`, []string{auth}, 400, reasonInvalidJSON},
		{"array body is {}", "POST", "/hooks/wake", `["text"]`, []string{auth}, 400, "text required"},
		{"missing text", "POST", "/hooks/wake", `{"mode":"now"}`, []string{auth}, 400, "text required"},
		{"empty body wake", "POST", "/hooks/wake", ``, []string{auth}, 400, "text required"},
		{"missing message", "POST", "/hooks/agent", `{"message":"   "}`, []string{auth}, 400, "message required"},
		{"bad channel", "POST", "/hooks/agent", `{"message":"m","channel":"fax"}`, []string{auth}, 400, "channel must be last|whatsapp|telegram|discord|slack|mattermost|signal|imessage|msteams"},
		{"empty model", "POST", "/hooks/agent", `{"message":"m","model":" "}`, []string{auth}, 400, "model required"},
		{"model not allowed", "POST", "/hooks/agent", `{"message":"m","model":"x/y"}`, []string{auth}, 400, string(errModelNotAllowed)},
		{"agent not allowed", "POST", "/hooks/agent", `{"message":"m","agentId":"ops"}`, []string{auth}, 400, string(errAgentNotAllowed)},
		{"session key disabled", "POST", "/hooks/agent", `{"message":"m","sessionKey":"hook:x"}`, []string{auth}, 400, string(errSessionKeyDisabled)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := in.do(c.method, c.path, c.body, c.hdr...)
			if r.status != c.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.body, c.status)
			}
			if c.want != "" {
				if e := r.json(t); e["ok"] != false || e["error"] != c.want {
					t.Fatalf("body %s, want error %q", r.body, c.want)
				}
			}
			if c.status == 405 && r.header.Get("Allow") != "POST" {
				t.Fatalf("405 without Allow: POST")
			}
		})
	}
	if n := len(in.gw.Received()); n != 0 {
		t.Fatalf("gateway saw %d rejected requests", n)
	}
	if r := in.do("GET", "/elsewhere", ""); r.status != 200 || r.body != "next handler" {
		t.Fatalf("outside the base path: %d %q", r.status, r.body)
	}
	if r := in.do("POST", "/hooksx/wake", `{}`); r.body != "next handler" {
		t.Fatalf("/hooksx is not under /hooks: %d %q", r.status, r.body)
	}
}

func TestIntegrationChunkedBodyOverLimit(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: "max_body 1KiB"})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"text":"` + strings.Repeat("y", 4096) + `"}`))
		_ = pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, in.base+"/hooks/wake", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+itHookToken)
	resp, err := in.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || len(req.TransferEncoding) == 0 && req.ContentLength != -1 && req.ContentLength != 0 {
		t.Fatalf("chunked over limit: %d (content-length %d)", resp.StatusCode, req.ContentLength)
	}
	if n := len(in.gw.Received()); n != 0 {
		t.Fatalf("a truncated body reached the gateway")
	}
}

func TestIntegrationLockout(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	bad := "Authorization: Bearer " + strings.Repeat("b", 40)
	for i := range 20 {
		// a forwarded header from an untrusted peer must not change the key
		r := in.do("POST", "/hooks/wake", `{"text":"x"}`, bad, fmt.Sprintf("X-Forwarded-For: 203.0.113.%d", i))
		if r.status != 401 {
			t.Fatalf("failure %d: status %d", i+1, r.status)
		}
	}
	r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 198.51.100.7")
	if r.status != 429 {
		t.Fatalf("valid token after 20 failures: %d, want 429", r.status)
	}
	ra := r.header.Get("Retry-After")
	var secs int
	if _, err := fmt.Sscan(ra, &secs); err != nil || secs < 1 || secs > 60 {
		t.Fatalf("Retry-After %q, want whole seconds in [1,60]", ra)
	}
	if n := len(in.gw.Received()); n != 0 {
		t.Fatalf("gateway saw %d requests from a locked address", n)
	}
	// the lockout table survives a config reload with the same settings
	in.load(strings.Replace(in.currentCaddyfile(t), "respond \"next handler\" 200", "respond \"reloaded\" 200", 1))
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 429 {
		t.Fatalf("after reload: %d, want 429 (lockout state lost)", r.status)
	}
}

// currentCaddyfile rebuilds the default test Caddyfile (for reload tests).
func (in *ingress) currentCaddyfile(t *testing.T) string {
	return in.caddyfile(fmt.Sprintf(`%s {
	bind 127.0.0.1
	hooks {
		token %s
		gateway unix/%s
		gateway_token %s
		`+testTransformTimeout+`
	}
	respond "next handler" 200
}
`, testSiteAddress, itHookToken, in.sock, itGatewayToken))
}

// caddyfile returns a test Caddyfile: the harness's global options and
// the given site blocks (which should use testSiteAddress or another
// `:0` address and `bind 127.0.0.1`).
func (in *ingress) caddyfile(sites ...string) string {
	return fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
	log {
		output file %s
		format json
		level DEBUG
	}
}
`, in.logPath) + strings.Join(sites, "\n")
}

func TestIntegrationTrustedProxyKeysLockout(t *testing.T) {
	in := startIngress(t, ingressOpts{global: `servers {
		trusted_proxies static 127.0.0.0/8
		trusted_proxies_strict
	}`})
	bad := "Authorization: Bearer " + strings.Repeat("c", 40)
	for range 20 {
		in.do("POST", "/hooks/wake", `{"text":"x"}`, bad, "X-Forwarded-For: 203.0.113.9")
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 203.0.113.9"); r.status != 429 {
		t.Fatalf("locked client behind trusted proxy: %d, want 429", r.status)
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 203.0.113.10"); r.status != 200 {
		t.Fatalf("another client behind the same trusted proxy: %d %s, want 200", r.status, r.body)
	}
}

func TestIntegrationIdempotentReplay(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	body := `{"message":"deploy finished"}`
	first := in.post("/hooks/agent", body, "Idempotency-Key: deploy-42")
	second := in.post("/hooks/agent", body, "Idempotency-Key: deploy-42")
	if first.status != 200 || second.status != 200 || first.body != second.body {
		t.Fatalf("replay: %d %s / %d %s", first.status, first.body, second.status, second.body)
	}
	third := in.post("/hooks/agent", `{"message":"deploy finished","idempotencyKey":"deploy-43"}`)
	fourth := in.post("/hooks/agent", `{"message":"deploy finished","idempotencyKey":"deploy-43"}`)
	if third.body != fourth.body || third.body == first.body {
		t.Fatalf("body-field key: %s / %s", third.body, fourth.body)
	}
	// a different action under the same key is a different request
	other := in.post("/hooks/agent", `{"message":"another"}`, "Idempotency-Key: deploy-42")
	if other.status != 200 || other.body == first.body {
		t.Fatalf("same key, other action: %d %s", other.status, other.body)
	}
	if n := in.gw.Count("agent"); n != 3 {
		t.Fatalf("gateway dispatches = %d, want 3", n)
	}
}

func TestIntegrationGatewayFailures(t *testing.T) {
	// long enough for the answering cases on a loaded machine, short
	// enough for the hanging one
	in := startIngress(t, ingressOpts{hooks: "gateway_timeout 3s"})
	// a gateway 4xx with {"ok":false,"error":…} becomes 400 "gateway: …"
	in.gw.FailWith(func(string) int { return 422 })
	r := in.post("/hooks/agent", `{"message":"m"}`)
	if e := r.json(t); r.status != 400 || e["error"] != "gateway: forced status 422" {
		t.Fatalf("gateway 422: %d %s", r.status, r.body)
	}
	// the gateway's 503 (e.g. its admission deadline) passes through
	in.gw.FailWith(func(string) int { return 503 })
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 503 || r.json(t)["error"] != "forced status 503" {
		t.Fatalf("gateway 503: %d %s, want 503 passed through", r.status, r.body)
	}
	in.gw.FailWith(func(string) int { return 500 })
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 502 {
		t.Fatalf("gateway 500: %d %s, want 502", r.status, r.body)
	}
	in.gw.FailWith(nil)
	in.stopGateway()
	// 502, not 504: a refused connection is answered at once, without
	// waiting out gateway_timeout
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 502 {
		t.Fatalf("dead gateway: %d %s, want 502", r.status, r.body)
	}
	// a gateway that accepts but never answers → 504 within the timeout
	ln, err := net.Listen("unix", in.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// 504 means gateway_timeout stopped the dispatch; the bound only
	// proves the request did not hang (the client gives up after 15s)
	start := time.Now()
	r = in.post("/hooks/wake", `{"text":"x"}`)
	if r.status != 504 || time.Since(start) > 10*time.Second {
		t.Fatalf("hanging gateway: %d after %s, want 504 (gateway_timeout 3s)", r.status, time.Since(start))
	}
}

func TestIntegrationLogsHoldNoSecrets(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	secretText := "PAYLOAD-CANARY-7f3e"
	in.post("/hooks/agent", `{"message":"`+secretText+`"}`)
	in.do("POST", "/hooks/agent", `{"message":"`+secretText+`"}`, "x-service-token: "+itHookToken)
	in.do("POST", "/hooks/agent", `{"message":"`+secretText+`"}`, "x-service-token: wrong-"+itHookToken)
	in.do("POST", "/hooks/agent", `{"message":"`+secretText+`","model":""}`, "x-service-token: "+itHookToken)
	in.do("POST", "/hooks/agent?token="+itHookToken, `{"message":"`+secretText+`"}`)
	// the query-token request is the last one: its redacted access entry
	// comes after every other line of these requests
	logs := in.waitLogs("hook request rejected", `"status":401`, `"X-Service-Token":["REDACTED"]`, "token=REDACTED")
	for _, secret := range []string{itHookToken, itGatewayToken, secretText} {
		if strings.Contains(logs, secret) {
			t.Errorf("log contains %q", secret[:12])
		}
	}
}

// jsonEqual compares two JSON-like values.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestIntegrationSpoolOutage(t *testing.T) {
	spoolDir := t.TempDir()
	in := startIngress(t, ingressOpts{noGW: true, hooks: `spool ` + spoolDir + ` {
			retry_initial 50ms
			retry_max 200ms
		}`})
	const n = 30
	ids := map[string]bool{}
	for i := range n {
		r := in.post("/hooks/agent", fmt.Sprintf(`{"message":"event %d"}`, i))
		if r.status != 200 {
			t.Fatalf("spooled accept %d: %d %s", i, r.status, r.body)
		}
		ids[r.json(t)["runId"].(string)] = true
	}
	if r := in.post("/hooks/wake", `{"text":"w"}`); r.status != 200 || r.json(t)["mode"] != "now" {
		t.Fatalf("spooled wake: %d %s", r.status, r.body)
	}
	in.startGateway() // the gateway comes up only now
	testkit.WaitForState(t, func() string { return fmt.Sprintf("delivered %d of %d after the outage", in.gw.Count(""), n+1) },
		func() bool { return in.gw.Count("") >= n+1 })
	if got := in.gw.Count(""); got != n+1 {
		t.Fatalf("delivered %d of %d after the outage", got, n+1)
	}
	for _, rec := range in.gw.Received() {
		if rec.Kind == "agent" && !ids[rec.IdempotencyKey] {
			t.Errorf("delivered event %q was never acknowledged as a runId", rec.IdempotencyKey)
		}
	}
}

// answerWithin bounds how long a test waits for an answer that must come
// without the client sending anything more; far below any server timeout
// the tests configure for the case they compare against.
const answerWithin = 10 * time.Second

// loadErr adapts and loads a Caddyfile and returns the error.
func (in *ingress) loadErr(cf string) error {
	in.t.Helper()
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": filepath.Join(in.dir, "Caddyfile")})
	if err != nil {
		return err
	}
	return caddy.Load(cfgJSON, true)
}

// siteCaddyfile is the test ingress's reload Caddyfile (currentCaddyfile)
// with extra global options, another site address and extra hooks lines.
func (in *ingress) siteCaddyfile(global, site, hooks string) string {
	return strings.NewReplacer(
		"\tpersist_config off\n", "\tpersist_config off\n\t"+global+"\n",
		testSiteAddress+" {", site+" {",
		"\t\tgateway_token "+itGatewayToken+"\n", "\t\tgateway_token "+itGatewayToken+"\n\t\t"+hooks+"\n",
	).Replace(in.currentCaddyfile(in.t))
}

// reloadTo loads cf and waits until a fresh connection reaches the new
// config (its respond text carries a marker): Caddy finishes shutting the
// replaced server down after the reload returns, and a connection that
// server still takes may be closed unanswered, or answered by the old
// config. get fetches a path outside the base path on a new connection
// (nil: over TCP to the test site).
func (in *ingress) reloadTo(cf string, get func(path string) (string, error)) {
	in.t.Helper()
	if get == nil {
		get = func(path string) (string, error) { return fetchFresh(&http.Transport{}, in.base+path) }
	}
	marker := fmt.Sprintf("config %d", time.Now().UnixNano())
	in.load(strings.Replace(cf, `respond "next handler" 200`, `respond "`+marker+`" 200`, 1))
	for deadline := time.Now().Add(answerWithin); ; {
		body, err := get("/elsewhere")
		if err == nil && body == marker {
			return
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("the reloaded config does not answer: %q %v", body, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitOldListenerClosed waits until one socket listens on in.base's
// address. A reload that keeps the port binds the new server's socket
// beside the old one (SO_REUSEPORT), and until the old server's shutdown
// closes its socket the kernel hands a new connection to either: the old
// server closes it unanswered (the client sees EOF) or answers it with
// the replaced config. One answer from the new config does not show that
// the next connection reaches it too.
func (in *ingress) waitOldListenerClosed() {
	in.t.Helper()
	addr, err := netip.ParseAddrPort(in.hostPort())
	if err != nil {
		return // not a TCP site
	}
	for deadline := time.Now().Add(answerWithin); ; {
		n, ok := listenguard.ListenersOn(addr)
		if !ok || n <= 1 {
			return
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("%d sockets still listen on %s: the replaced server does not close its own", n, addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fetchFresh GETs url on a new connection of tr and returns the body.
func fetchFresh(tr *http.Transport, url string) (string, error) {
	tr.DisableKeepAlives = true
	c := &http.Client{Transport: tr, Timeout: answerWithin}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// rawAnswer is what a raw HTTP/1.1 exchange got back.
type rawAnswer struct {
	status  int
	header  http.Header
	closed  bool // the server closed the connection after the answer
	closing bool // the answer says it closes the connection
	err     error
}

// rawRequest writes req on a fresh connection to addr, and reads one
// answer and whether the server then closes the connection, each within
// answerWithin.
func rawRequest(network, addr, req string) rawAnswer {
	c, err := net.DialTimeout(network, addr, answerWithin)
	if err != nil {
		return rawAnswer{err: err}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(answerWithin))
	if _, err := io.WriteString(c, req); err != nil {
		return rawAnswer{err: err}
	}
	return readAnswer(c, true)
}

// readAnswer reads one response from c and, with checkClose, whether the
// server closes c after it.
func readAnswer(c net.Conn, checkClose bool) rawAnswer {
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return rawAnswer{err: err}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := rawAnswer{status: resp.StatusCode, header: resp.Header, closing: resp.Close}
	if checkClose {
		// a reset is a close too: a client still writing when the server
		// closes gets one
		_, err = br.ReadByte()
		a.closed = err == io.EOF || errors.Is(err, syscall.ECONNRESET)
		if err != nil && !a.closed {
			a.err = fmt.Errorf("after the answer: %w", err)
		}
	}
	return a
}

// hostPort is the ingress's TCP address.
func (in *ingress) hostPort() string { return strings.TrimPrefix(in.base, "http://") }

// waitLogs waits until the Caddy log holds every one of want and returns
// it. Lines are written as requests finish, not necessarily before the
// client has its answer.
func (in *ingress) waitLogs(want ...string) string {
	in.t.Helper()
	var logs string
	ok := testkit.Eventually(testkit.PollTimeout, func() bool {
		logs = in.logs()
		for _, w := range want {
			if !strings.Contains(logs, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		in.t.Fatalf("the log lacks one of %q after %v:\n%s", want, testkit.PollTimeout, logs)
	}
	return logs
}
