package caddyhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// forwardSecretEnv holds the signing secret of the forward tests' signed
// mapping.
const forwardSecretEnv = "CADDYHOOK_IT_FORWARD_SECRET"

// forwardHooks is the hooks block of the forward-mode integration tests.
const forwardHooks = `mode forward
		agents main
		allowed_agent_ids main
		allow_request_session_key
		allowed_session_key_prefixes hook:
		idempotency_headers x-openclaw-idempotency-key
		presets gmail
		mapping github {
			match_path github
			match_expr "headers['x-github-event'] != 'ping'"
			forward
		}
		mapping signed {
			match_path signed
			forward
			verify github {
				secret {env.` + forwardSecretEnv + `}
			}
		}`

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// lastReceived returns the gateway's newest record after n earlier ones.
func lastReceived(t *testing.T, gw *devgw.Gateway, n int) devgw.Received {
	t.Helper()
	got := gw.Received()
	if len(got) != n+1 {
		t.Fatalf("gateway received %d requests, want 1", len(got)-n)
	}
	return got[n]
}

func TestIntegrationForward(t *testing.T) {
	const secret = "forward-secret-5c1e9a7b3d2f4e6a"
	t.Setenv(forwardSecretEnv, secret)
	in := startIngress(t, ingressOpts{hooks: forwardHooks})

	t.Run("wake byte for byte", func(t *testing.T) {
		n := len(in.gw.Received())
		body := "\uFEFF { \"text\" : \"deploy done\", \"extra\": [1, 2.50, {\"a\":null}] }\n"
		r := in.post("/hooks/wake", body)
		if r.status != 200 || r.json(t)["eventOutcome"] != "enqueued" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%d %s %v: want the gateway's reply with nosniff", r.status, r.body, r.header)
		}
		rec := lastReceived(t, in.gw, n)
		if _, added := rec.Header["Idempotency-Key"]; rec.Kind != "wake" || string(rec.Raw) != body || added {
			t.Fatalf("gateway got %s %q key %q: want the body as sent, no key the sender did not send", rec.Kind, rec.Raw, rec.IdempotencyKey)
		}
	})

	t.Run("agent with the sender's key", func(t *testing.T) {
		n := len(in.gw.Received())
		body := `{"message":"summarise","deliver":false,"sessionMode":"isolated","waitForCompletion":false}`
		first := in.post("/hooks/agent", body, "Idempotency-Key:  k-agent-1 ")
		again := in.post("/hooks/agent", body, "Idempotency-Key: k-agent-1")
		if first.status != 200 || again.body != first.body {
			t.Fatalf("first %d %s, replay %d %s", first.status, first.body, again.status, again.body)
		}
		rec := lastReceived(t, in.gw, n)
		if string(rec.Raw) != body || rec.IdempotencyKey != "k-agent-1" {
			t.Fatalf("gateway got %q key %q", rec.Raw, rec.IdempotencyKey)
		}
		if rec.Body["sessionKey"] != nil || rec.Body["agentId"] != nil {
			t.Fatalf("the edge added routing fields: %v", rec.Body)
		}
	})

	t.Run("gateway's idempotency header alias as sent", func(t *testing.T) {
		n := len(in.gw.Received())
		r := in.post("/hooks/agent", `{"message":"alias"}`, "x-openclaw-idempotency-key: k-alias")
		rec := lastReceived(t, in.gw, n)
		if _, added := rec.Header["Idempotency-Key"]; r.status != 200 || rec.IdempotencyKey != "k-alias" ||
			rec.Header.Get("X-Openclaw-Idempotency-Key") != "k-alias" || added {
			t.Fatalf("%d: gateway key %q, headers %v", r.status, rec.IdempotencyKey, rec.Header)
		}
	})

	t.Run("mapped hook with query and headers", func(t *testing.T) {
		n := len(in.gw.Received())
		body := `{"action":"opened","number":7}`
		r := in.post("/hooks/github?q=a%20b&access_token=s3cr3t&event=pr&apiKey=k", body,
			"X-GitHub-Event: pull_request", "X-Forwarded-For: 203.0.113.7", "Cookie: sid=1", "User-Agent: GitHub-Hookshot/x",
			"X-Custom: kept", "Idempotency-Key: k-gh")
		if r.status != 200 || !uuidRE.MatchString(r.json(t)["runId"].(string)) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		rec := lastReceived(t, in.gw, n)
		if rec.Kind != devgw.KindHook || rec.Path != "github" || rec.Query != "q=a%20b&access_token=s3cr3t&event=pr&apiKey=k" || string(rec.Raw) != body {
			t.Fatalf("gateway got %s %s?%s %q", rec.Kind, rec.Path, rec.Query, rec.Raw)
		}
		for name, want := range map[string]string{
			"X-Github-Event": "pull_request", "User-Agent": "GitHub-Hookshot/x", "X-Custom": "kept",
			"Content-Type": "application/json", "Authorization": "Bearer " + itGatewayToken, "Idempotency-Key": "k-gh",
			"X-Forwarded-For": "", "Cookie": "", "X-Service-Token": "",
		} {
			if got := rec.Header.Get(name); got != want {
				t.Errorf("gateway header %s = %q, want %q", name, got, want)
			}
		}
	})

	t.Run("edge filter (CEL) refuses before forwarding", func(t *testing.T) {
		n := len(in.gw.Received())
		if r := in.post("/hooks/github", `{}`, "X-GitHub-Event: ping"); r.status != 404 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if len(in.gw.Received()) != n {
			t.Fatal("a filtered hook reached the gateway")
		}
	})

	t.Run("signed hook without the token", func(t *testing.T) {
		n := len(in.gw.Received())
		body := `{"zen":"Keep it logically awesome.","hook_id":1}`
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		r := in.do(http.MethodPost, "/hooks/signed", body, "X-Hub-Signature-256: sha256="+hex.EncodeToString(mac.Sum(nil)),
			"X-GitHub-Event: push", "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958")
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		rec := lastReceived(t, in.gw, n)
		if rec.Path != "signed" || string(rec.Raw) != body || rec.Header.Get("X-Hub-Signature-256") != "" ||
			rec.Header.Get("X-Github-Delivery") != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || rec.Header.Get("X-Github-Event") != "push" {
			t.Fatalf("gateway got %s %q key %q headers %v", rec.Path, rec.Raw, rec.IdempotencyKey, rec.Header)
		}
		if r := in.do(http.MethodPost, "/hooks/signed", body, "X-Hub-Signature-256: sha256=00"); r.status != 401 {
			t.Fatalf("bad signature: %d", r.status)
		}
	})

	t.Run("gmail preset is forwarded", func(t *testing.T) {
		n := len(in.gw.Received())
		body := `{"messages":[{"id":"m1","from":"a@b","subject":"s","snippet":"x","body":"y"}]}`
		if r := in.post("/hooks/gmail", body); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if rec := lastReceived(t, in.gw, n); rec.Path != "gmail" || string(rec.Raw) != body {
			t.Fatalf("gateway got %s %q", rec.Path, rec.Raw)
		}
	})

	t.Run("parity refusals stay at the edge", func(t *testing.T) {
		n := len(in.gw.Received())
		for _, c := range []struct{ path, body, want string }{
			{"/hooks/agent", `{"message":"m","to":42}`, "to must be a non-empty string for hook delivery"},
			{"/hooks/agent", `{"message":"m","agentId":"ghost"}`, `unknown agentId "ghost"`},
			{"/hooks/agent", `{"message":"m","sessionMode":"persistent"}`, "sessionKey is required when sessionMode is persistent"},
			{"/hooks/wake", `{"text":"t","agentId":""}`, "agentId must be a non-empty string"},
			{"/hooks/wake", `{"text":"t","sessionKey":"x:1"}`, "sessionKey must start with one of: hook:"},
		} {
			r := in.post(c.path, c.body)
			if r.status != 400 || r.json(t)["error"] != c.want {
				t.Errorf("%s %s: %d %s, want 400 %q", c.path, c.body, r.status, r.body, c.want)
			}
		}
		if r := in.post("/hooks/unmapped", `{}`); r.status != 404 {
			t.Errorf("unmapped hook: %d", r.status)
		}
		if len(in.gw.Received()) != n {
			t.Fatal("a refused request reached the gateway")
		}
	})

	t.Run("gateway refusals pass through", func(t *testing.T) {
		in.gw.FailWith(func(string) int { return 409 })
		defer in.gw.FailWith(nil)
		r := in.post("/hooks/agent", `{"message":"m"}`)
		if r.status != 409 || r.json(t)["error"] != "forced status 409" {
			t.Fatalf("%d %s, want the gateway's 409 as it is", r.status, r.body)
		}
		in.gw.FailWith(func(string) int { return 401 })
		if r := in.post("/hooks/agent", `{"message":"m"}`); r.status != 502 || r.json(t)["error"] != reasonGatewayAuth {
			t.Fatalf("%d %s, want 502 for the edge's own credentials", r.status, r.body)
		}
	})
}

// TestIntegrationForwardDefaultKey checks that in forward mode the edge
// adds a session key only where its own default_session_key assigns one.
func TestIntegrationForwardDefaultKey(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: `mode forward
		allow_request_session_key
		default_session_key hook:edge`})
	n := len(in.gw.Received())
	if r := in.post("/hooks/agent", `{"message":"m"}`); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if rec := lastReceived(t, in.gw, n); string(rec.Raw) != `{"message":"m","sessionKey":"hook:edge"}` {
		t.Fatalf("gateway got %q", rec.Raw)
	}
}

func TestIntegrationForwardSpool(t *testing.T) {
	t.Setenv(forwardSecretEnv, "forward-secret-5c1e9a7b3d2f4e6a")
	in := startIngress(t, ingressOpts{noGW: true, hooks: forwardHooks + `
		spool ` + t.TempDir() + ` {
			retry_initial 20ms
			retry_max 100ms
		}`})
	type sent struct{ path, body, key string }
	agentBody := "{\"message\":\"spooled\",\n \"deliver\":false}"
	ghBody := `{"action":"closed"}`
	r1 := in.post("/hooks/agent", agentBody, "Idempotency-Key: k-spool")
	r2 := in.post("/hooks/github?event=pr&token_hint=x", ghBody, "X-GitHub-Event: pull_request")
	r3 := in.post("/hooks/wake", `{"text":"w","mode":"next-heartbeat"}`)
	if r1.status != 200 || r2.status != 200 || r3.status != 200 || r3.body != `{"ok":true,"mode":"next-heartbeat"}` {
		t.Fatalf("accept: %d %s / %d %s / %d %s", r1.status, r1.body, r2.status, r2.body, r3.status, r3.body)
	}
	if r := in.post("/hooks/agent", `{"message":"m","waitForCompletion":true}`); r.status != 400 || r.json(t)["error"] != reasonWaitSpooled {
		t.Fatalf("waitForCompletion with a spool: %d %s", r.status, r.body)
	}
	ghID, _ := r2.json(t)["runId"].(string)
	in.startGateway()
	deadline := time.Now().Add(15 * time.Second)
	for len(in.gw.Received()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]devgw.Received{}
	for _, rec := range in.gw.Received() {
		got[rec.Path] = rec
	}
	if len(got) != 3 {
		t.Fatalf("delivered %d distinct hooks: %v", len(got), got)
	}
	if a := got["agent"]; string(a.Raw) != agentBody || a.IdempotencyKey != "k-spool" {
		t.Errorf("agent delivered as %q key %q", a.Raw, a.IdempotencyKey)
	}
	if g := got["github"]; string(g.Raw) != ghBody || g.Query != "event=pr&token_hint=x" || g.IdempotencyKey != ghID ||
		g.Header.Get("X-Github-Event") != "pull_request" || g.Header.Get("Authorization") != "Bearer "+itGatewayToken {
		t.Errorf("github delivered as %q ?%s key %q (reply runId %q) headers %v", g.Raw, g.Query, g.IdempotencyKey, ghID, g.Header)
	}
	if w := got["wake"]; string(w.Raw) != `{"text":"w","mode":"next-heartbeat"}` {
		t.Errorf("wake delivered as %q", w.Raw)
	}
}

// TestIntegrationForwardSpoolTimeoutRetry checks that a dispatch that
// timed out is retried by the spool with the same Idempotency-Key.
func TestIntegrationForwardSpoolTimeoutRetry(t *testing.T) {
	var (
		mu    sync.Mutex
		seen  []string
		first = make(chan struct{})
	)
	sock := startStubGateway(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Idempotency-Key"))
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-r.Context().Done() // the edge gives up: the run may have started
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"runId":"r"}`))
	})
	in := startIngress(t, ingressOpts{noGW: true, gateway: "unix/" + sock, hooks: `mode forward
		gateway_timeout 200ms
		spool ` + t.TempDir() + ` {
			retry_initial 20ms
			retry_max 50ms
		}`})
	r := in.post("/hooks/agent", `{"message":"slow"}`)
	id, _ := r.json(t)["runId"].(string)
	if r.status != 200 || !uuidRE.MatchString(id) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	<-first
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a timed-out dispatch was not retried")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range seen {
		if k != id {
			t.Fatalf("attempts carried keys %v, want %s every time", seen, id)
		}
	}
}

// TestIntegrationForwardWait checks that a request waiting for its run
// (waitForCompletion) may take longer than gateway_timeout.
func TestIntegrationForwardWait(t *testing.T) {
	sock := startStubGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "agent") {
			time.Sleep(400 * time.Millisecond) // longer than gateway_timeout
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"runId":"r","completion":{"status":"ok"}}`))
	})
	in := startIngress(t, ingressOpts{noGW: true, gateway: "unix/" + sock, hooks: `mode forward
		gateway_timeout 200ms
		gateway_wait_timeout 10s`})
	if r := in.post("/hooks/agent", `{"message":"m","waitForCompletion":true}`); r.status != 200 || r.json(t)["completion"] == nil {
		t.Fatalf("waiting request: %d %s", r.status, r.body)
	}
	if r := in.post("/hooks/agent", `{"message":"m"}`); r.status != 504 || r.json(t)["error"] != reasonGatewayTimeout {
		t.Fatalf("request without waitForCompletion: %d %s, want 504", r.status, r.body)
	}
}

// TestIntegrationForwardFraming: a forwarded body reaches the gateway
// framed as the sender framed it (D18 of issue 35), sync and through a
// spool: an empty body sent with Content-Length: 0 arrives with
// Content-Length: 0 (not chunked), a chunked body arrives chunked (no
// Content-Length), a body with a length with that length.
func TestIntegrationForwardFraming(t *testing.T) {
	t.Setenv(forwardSecretEnv, "forward-secret-5c1e9a7b3d2f4e6a")
	for _, spooled := range []bool{false, true} {
		hooks := forwardHooks
		if spooled {
			hooks += "\n\t\tspool " + t.TempDir() + " {\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}"
		}
		in := startIngress(t, ingressOpts{hooks: hooks})
		raw := func(te string, body string) string {
			return "POST /hooks/github HTTP/1.1\r\nHost: " + in.hostPort() + "\r\nAuthorization: Bearer " + itHookToken +
				"\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n" + te + "Connection: close\r\n\r\n" + body
		}
		for _, tc := range []struct {
			name, req, body string
			contentLength   string // as the gateway receives it; "" = none (chunked)
		}{
			{"Content-Length: 0", raw("Content-Length: 0\r\n", ""), "", "0"},
			{"chunked", raw("Transfer-Encoding: chunked\r\n", "7\r\n{\"a\":1}\r\n0\r\n\r\n"), `{"a":1}`, ""},
			{"empty chunked", raw("Transfer-Encoding: chunked\r\n", "0\r\n\r\n"), "", ""},
			{"with a length", raw("Content-Length: 7\r\n", `{"a":2}`), `{"a":2}`, "7"},
		} {
			n := len(in.gw.Received())
			if a := rawRequest("tcp", in.hostPort(), tc.req); a.err != nil || a.status != 200 {
				t.Fatalf("spooled=%v %s: %+v", spooled, tc.name, a)
			}
			for deadline := time.Now().Add(15 * time.Second); len(in.gw.Received()) == n && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond) // a spool delivers after the answer
			}
			rec := lastReceived(t, in.gw, n)
			if string(rec.Raw) != tc.body || rec.Header.Get("Content-Length") != tc.contentLength {
				t.Errorf("spooled=%v %s: the gateway got %q with Content-Length %q, want %q with %q",
					spooled, tc.name, rec.Raw, rec.Header.Get("Content-Length"), tc.body, tc.contentLength)
			}
		}
	}
}

// TestIntegrationForwardWakeMappingOrder: a wake mapping's requests are
// spooled in the wake lane, so that they reach the gateway in acceptance
// order, as /wake's do (D31 of issue 35): a forward mapping with action
// wake (what `caddy hooks import` writes for the gateway's wake mappings;
// the sender's answer keeps the forwarded hook's shape) and a rendered
// one, through a local spool, and the rendered one through `spool
// cluster` too (a real nats-server; the forwarded one through the
// cluster is TestDifferential's). The gateway is down while the requests
// are accepted, so that every one is queued before the first delivery.
func TestIntegrationForwardWakeMappingOrder(t *testing.T) {
	local := func(t *testing.T) string {
		return "spool " + t.TempDir() + " {\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}"
	}
	cluster := func(t *testing.T) string {
		nats := natstest.Run(t, natstest.Options{})
		return clusterLines(nats.URL()) + "\n\t\tspool cluster {\n\t\t\tfallback reject\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}"
	}
	const render = "action wake\n\t\t\ttext_template \"o{{payload.o}}x\""
	for _, tc := range []struct {
		name, mode, mapping string
		spool               func(t *testing.T) string
	}{
		{"forward", "forward", "forward\n\t\t\taction wake", local},
		{"render", "render", render, local},
		{"render cluster", "render", render, cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := startIngress(t, ingressOpts{noGW: true, hooks: `mode ` + tc.mode + `
		mapping alert {
			match_path alert
			` + tc.mapping + `
		}
		` + tc.spool(t)})
			const n = 12
			for i := range n {
				if r := in.post("/hooks/alert", `{"o":`+strconv.Itoa(i)+`}`); r.status != 200 || (tc.mode == "forward") != (r.json(t)["runId"] != nil) {
					t.Fatalf("accept %d: %d %s", i, r.status, r.body)
				}
			}
			in.startGateway()
			deadline := time.Now().Add(15 * time.Second)
			for len(in.gw.Received()) < n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			var order []string
			for _, rec := range in.gw.Received() {
				order = append(order, string(rec.Raw))
			}
			for i := range n {
				want := `{"o":` + strconv.Itoa(i) + `}` // forwarded as sent
				if i < len(order) && tc.mode == "render" && strings.Contains(order[i], `"o`+strconv.Itoa(i)+`x`) {
					continue
				}
				if i >= len(order) || order[i] != want {
					t.Fatalf("delivered in the order %q, want acceptance order", order)
				}
			}
		})
	}
}
