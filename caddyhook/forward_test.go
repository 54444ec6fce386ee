package caddyhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// TestWithField: the edge's field is the body's last member, so that it
// wins over one of that name the body has (JSON.parse keeps the last).
func TestWithField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"message":"m"}`, `{"message":"m","sessionKey":"hook:d"}`},
		{"\uFEFF {\"message\":\"m\"}\n", `{"message":"m","sessionKey":"hook:d"}`},
		{`{ }`, `{ "sessionKey":"hook:d"}`},
		{`{}`, `{"sessionKey":"hook:d"}`},
		{``, `{"sessionKey":"hook:d"}`},
		{`{"message":"m","sessionKey":null}`, `{"message":"m","sessionKey":null,"sessionKey":"hook:d"}`},
		{"{\n  \"a\": [1, {\"b\": \"}\"}]\n}", "{\n  \"a\": [1, {\"b\": \"}\"}]\n,\"sessionKey\":\"hook:d\"}"},
	} {
		got := withField([]byte(tc.in), "sessionKey", "hook:d")
		if string(got) != tc.want {
			t.Errorf("withField(%q) = %q, want %q", tc.in, got, tc.want)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil || m["sessionKey"] != "hook:d" {
			t.Errorf("withField(%q) = %q: %v, sessionKey %v", tc.in, got, err, m["sessionKey"])
		}
	}
}

func TestForwardMappingProvision(t *testing.T) {
	fwd := func(m Mapping) Mapping { m.ID, m.Forward = "f", true; return m }
	deliver := false
	for _, tc := range []struct {
		name string
		m    Mapping
		want string // "" = accepted
	}{
		{"path only", fwd(Mapping{MatchPath: "github"}), ""},
		{"nested path, source, expression, limit", fwd(Mapping{MatchPath: "/ci/jenkins/", MatchSource: "jenkins",
			MatchExpr: "payload.build.status == 'FAILURE'", MaxBody: 1 << 20}), ""},
		{"verify", fwd(Mapping{MatchPath: "github", Verify: githubConfig(sigGitHubSecret), RequireToken: true}), ""},
		{"no path: every hook name", fwd(Mapping{MatchSource: "beta"}), ""},
		{"built-in", fwd(Mapping{MatchPath: "agent"}), `mapping f: match_path: "agent" is a built-in hook`},
		{"dot segment", fwd(Mapping{MatchPath: "a/../b"}), `mapping f: match_path: "a/../b" is not a plain hook path`},
		// names are compared decoded: a b answers /hooks/a%20b, café /hooks/caf%C3%A9
		{"escaped character", fwd(Mapping{MatchPath: "a b"}), ""},
		{"non-ASCII", fwd(Mapping{MatchPath: "café"}), ""},
		{"question mark", fwd(Mapping{MatchPath: "a?b"}), `mapping f: match_path: "a?b" is not a plain hook path`},
		{"control character", fwd(Mapping{MatchPath: "a\x01b"}), `mapping f: match_path: "a\x01b" is not a plain hook path`},
		{"template", fwd(Mapping{MatchPath: "x", MessageTemplate: "{{a}}"}), "mapping f: message_template: not allowed with forward"},
		{"action, the spool lane", fwd(Mapping{MatchPath: "x", Action: "wake"}), ""},
		{"bad action", fwd(Mapping{MatchPath: "x", Action: "sleep"}), `mapping f: action: "sleep" must be agent or wake`},
		{"wake mode", fwd(Mapping{MatchPath: "x", WakeMode: "now"}), "mapping f: wake_mode: not allowed with forward"},
		{"session key", fwd(Mapping{MatchPath: "x", SessionKey: "hook:x"}), "mapping f: session_key: not allowed with forward"},
		{"deliver", fwd(Mapping{MatchPath: "x", Deliver: &deliver}), "mapping f: deliver: not allowed with forward"},
		{"for_each", fwd(Mapping{MatchPath: "x", ForEach: "items"}), "mapping f: for_each: not allowed with forward"},
		{"unsafe", fwd(Mapping{MatchPath: "x", AllowUnsafeExternalContent: true}), "mapping f: allow_unsafe_external_content: not allowed with forward"},
		{"transform", fwd(Mapping{MatchPath: "x", Transform: &TransformRef{Module: "t.js"}}), "mapping f: transform: not allowed with forward"},
		{"bad expression", fwd(Mapping{MatchPath: "x", MatchExpr: "payload."}), "mapping f: match_expr:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			h.Mappings = []Mapping{tc.m}
			err := provision(t, h)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestForwardModePresets(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.Mode, h.Presets = modeForward, []string{"gmail"} })
	if len(h.router.mappings) != 1 || !h.router.mappings[0].forward || h.router.mappings[0].path != "gmail" || h.router.mappings[0].bodyLimit != gmailMaxBody {
		t.Fatalf("gmail preset in forward mode: %+v", h.router.mappings[0])
	}
	if h.wrapEdge {
		t.Fatal("forward mode wraps at the edge by default")
	}
	h = newTestHandler(t, nil, func(h *Handler) { h.Mode, h.Wrap = modeForward, wrapByEdge })
	if !h.wrapEdge {
		t.Fatal("wrap edge ignored in forward mode")
	}
}

func TestUsableIdemKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"k", "k"},
		{"  k \t", "k"},
		{"\uFEFFk\u00a0", "k"},
		{"   ", ""},
		{strings.Repeat("a", 256), strings.Repeat("a", 256)},
		{strings.Repeat("a", 257), ""},
		{strings.Repeat("é", 256), strings.Repeat("é", 256)}, // 512 bytes, 256 UTF-16 units
		{strings.Repeat("😀", 128), strings.Repeat("😀", 128)}, // 256 units
		{strings.Repeat("😀", 129), ""},                       // 258 units
		{strings.Repeat("é", 257), ""},
	} {
		if got := usableIdemKey(tc.in); got != tc.want {
			t.Errorf("usableIdemKey(%.20q…) = %.20q…, want %.20q…", tc.in, got, tc.want)
		}
	}
}

func TestIdempotencyKeyResolution(t *testing.T) {
	long := strings.Repeat("l", 257)
	for _, tc := range []struct {
		name    string
		aliases []string
		hdr     http.Header
		body    map[string]any
		want    string
	}{
		{"header", nil, http.Header{"Idempotency-Key": {" k1 "}}, nil, "k1"},
		{"body field trimmed", nil, nil, map[string]any{"idempotencyKey": " k2 "}, "k2"},
		{"header before field", nil, http.Header{"Idempotency-Key": {"k1"}}, map[string]any{"idempotencyKey": "k2"}, "k1"},
		{"long header ignored, field used", nil, http.Header{"Idempotency-Key": {long}}, map[string]any{"idempotencyKey": "k2"}, "k2"},
		{"long everything ignored", nil, http.Header{"Idempotency-Key": {long}}, map[string]any{"idempotencyKey": long}, ""},
		{"blank header ignored", nil, http.Header{"Idempotency-Key": {"  "}}, map[string]any{"idempotencyKey": "k2"}, "k2"},
		{"non-string field ignored", nil, nil, map[string]any{"idempotencyKey": 7.0}, ""},
		{"alias not configured", nil, http.Header{"X-Openclaw-Idempotency-Key": {"k3"}}, nil, ""},
		{"alias", []string{"x-openclaw-idempotency-key"}, http.Header{"X-Openclaw-Idempotency-Key": {"k3"}}, nil, "k3"},
		{"Idempotency-Key first", []string{"x-openclaw-idempotency-key"},
			http.Header{"X-Openclaw-Idempotency-Key": {"k3"}, "Idempotency-Key": {"k1"}}, nil, "k1"},
		{"long Idempotency-Key falls to the alias", []string{"x-openclaw-idempotency-key"},
			http.Header{"X-Openclaw-Idempotency-Key": {"k3"}, "Idempotency-Key": {long}}, nil, "k3"},
		{"repeated header joined as node does", nil, http.Header{"Idempotency-Key": {"a", "b"}}, nil, "a, b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler(t, nil, func(h *Handler) { h.IdempotencyHeaders = tc.aliases })
			r := httptest.NewRequest(http.MethodPost, "/hooks/agent", nil)
			for k, v := range tc.hdr {
				r.Header[k] = v
			}
			ex := exchange{r: r, payload: tc.body}
			if got := h.idem.key(&ex); got != tc.want {
				t.Fatalf("key %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWaitTimeoutFor(t *testing.T) {
	c := newGatewayClient(gatewayAddr{}, "/hooks", "", 30*time.Second, false)
	c.waitTimeout = 10 * time.Minute
	for _, tc := range []struct {
		secs int64
		want time.Duration
	}{
		{0, 10 * time.Minute},
		{60, 90 * time.Second},
		{1, 31 * time.Second},
		{3600, 10 * time.Minute},
		{1 << 40, 10 * time.Minute},
	} {
		if got := c.waitTimeoutFor(tc.secs); got != tc.want {
			t.Errorf("waitTimeoutFor(%d) = %v, want %v", tc.secs, got, tc.want)
		}
	}
}

func TestForwardOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rep    gatewayReply
		err    error
		status int // 0 = passes as a success
		body   string
		retry  time.Duration
	}{
		{"ok", gatewayReply{status: 200, body: []byte(`{"ok":true}`)}, nil, 0, "", 0},
		{"accepted", gatewayReply{status: 202, body: []byte(`{}`)}, nil, 0, "", 0},
		{"gateway 400 verbatim", gatewayReply{status: 400, body: []byte(`{"ok":false,"error":"unknown agentId \"x\""}`)}, nil,
			400, `{"ok":false,"error":"unknown agentId \"x\""}`, 0},
		{"gateway 404", gatewayReply{status: 404, body: []byte(`"Not Found"`)}, nil, 404, `"Not Found"`, 0},
		{"gateway 404 plain text", gatewayReply{status: 404, body: []byte("Not Found")}, nil, 404, "", 0},
		{"mapping failed 500", gatewayReply{status: 500, body: []byte(`{"ok":false,"error":"hook mapping failed"}`)}, nil,
			500, `{"ok":false,"error":"hook mapping failed"}`, 0},
		{"503 with Retry-After", gatewayReply{status: 503, body: []byte(`{"ok":false}`), retryAfter: "12"}, nil, 503, `{"ok":false}`, 12 * time.Second},
		{"401 is the edge's credentials", gatewayReply{status: 401, body: []byte("Unauthorized")}, nil, 502, "", 0},
		{"403 forwarded headers", gatewayReply{status: 403}, nil, 502, "", 0},
		{"429 edge locked out", gatewayReply{status: 429}, nil, 502, "", 0},
		{"redirect", gatewayReply{status: 302}, nil, 502, "", 0},
		{"timeout", gatewayReply{}, errGatewayTimeout, 504, "", 0},
		{"down", gatewayReply{}, errBodyTooLarge, 502, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			herr := answer(tc.rep, tc.err, true)
			if tc.status == 0 {
				if herr != nil {
					t.Fatalf("refused: %+v", herr)
				}
				return
			}
			if herr == nil || herr.status != tc.status || string(herr.body) != tc.body || herr.retryAfter != tc.retry {
				t.Fatalf("got %+v, want status %d body %q retry %v", herr, tc.status, tc.body, tc.retry)
			}
			w := httptest.NewRecorder()
			writeError(w, herr)
			if tc.body != "" && w.Body.String() != tc.body {
				t.Fatalf("written body %q, want %q", w.Body, tc.body)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("no nosniff")
			}
		})
	}
}

func TestComposeWakeReply(t *testing.T) {
	wakes := []prepared{{gatewayRequest: gatewayRequest{kind: kindWake}, mode: "now"}, {gatewayRequest: gatewayRequest{kind: kindWake}, mode: "now"}}
	for _, tc := range []struct {
		outcome string
		want    string
	}{
		{"queued", `{"ok":true,"mode":"now","eventOutcome":"queued"}`},
		{"", `{"ok":true,"mode":"now"}`},
	} {
		if got := composeReply(wakes, []string{"", ""}, tc.outcome, 3); string(got) != tc.want {
			t.Errorf("composeReply = %s, want %s", got, tc.want)
		}
	}
}

// TestWakeFanoutEventOutcome checks that a wake fan-out reply keeps the
// gateway's eventOutcome: the first "queued" one, as the gateway reports.
func TestWakeFanoutEventOutcome(t *testing.T) {
	sock := startStubGateway(t, func(w http.ResponseWriter, r *http.Request) {
		var b struct{ Text string }
		_ = json.NewDecoder(r.Body).Decode(&b)
		outcome := "coalesced"
		if b.Text == "ping 2" {
			outcome = "queued"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"mode":"now","eventOutcome":"` + outcome + `"}`))
	})
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway = "unix/" + sock
		h.Mappings = []Mapping{{ID: "pings", MatchPath: "pings", Action: "wake", ForEach: "items", TextTemplate: "ping {{items[0].n}}"}}
	})
	w := serve(t, h, hookRequest{target: "/hooks/pings", body: `{"items":[{"n":1},{"n":2},{"n":3}]}`, header: headers(auth, jsonCT)})
	if w.Code != 200 || w.Body.String() != `{"ok":true,"mode":"now","eventOutcome":"queued"}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestForwardBuiltinBodies checks, through the handler, that forward mode
// sends /wake and /agent bodies exactly as received, adding only a
// session key the edge's own default_session_key assigns.
func TestForwardBuiltinBodies(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	for _, tc := range []struct {
		name, defaultKey, path, body, want string
	}{
		{"wake as sent", "", "/hooks/wake", "\uFEFF{ \"text\" : \"x\", \"extra\": [1,2] }\n", "\uFEFF{ \"text\" : \"x\", \"extra\": [1,2] }\n"},
		{"wake never gets the default key", "hook:d", "/hooks/wake", `{"text":"x"}`, `{"text":"x"}`},
		{"agent as sent, no key generated", "", "/hooks/agent", `{"message":"m","deliver":false}`, `{"message":"m","deliver":false}`},
		{"agent with the edge's default key", "hook:d", "/hooks/agent", `{"message":"m"}`, `{"message":"m","sessionKey":"hook:d"}`},
		{"agent with its own key", "hook:d", "/hooks/agent", `{"message":"m","sessionKey":"hook:own"}`, `{"message":"m","sessionKey":"hook:own"}`},
		{"agent id is never added", "", "/hooks/agent", `{"message":"m","agentId":"MAIN"}`, `{"message":"m","agentId":"MAIN"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHandler(t, gw, func(h *Handler) {
				h.Mode, h.DefaultSessionKey, h.Agents = modeForward, tc.defaultKey, []string{"main"}
				h.AllowRequestSessionKey, h.AllowedSessionKeyPrefixes = true, []string{"hook:"}
			})
			before := len(gw.Received())
			w := serve(t, h, hookRequest{target: tc.path, body: tc.body, header: headers(auth, jsonCT)})
			if w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			got := gw.Received()
			if len(got) != before+1 {
				t.Fatalf("gateway received %d requests", len(got)-before)
			}
			if rec := got[len(got)-1]; string(rec.Raw) != tc.want || rec.IdempotencyKey != "" || rec.Header.Get("Authorization") != "Bearer "+utGatewayToken {
				t.Fatalf("gateway got %q (key %q, auth %q), want %q", rec.Raw, rec.IdempotencyKey, rec.Header.Get("Authorization"), tc.want)
			}
		})
	}
}

// TestForwardNoContent checks that the gateway's 204 (a mapping that
// produced nothing) passes through.
func TestForwardNoContent(t *testing.T) {
	sock := startStubGateway(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway, h.Mode, h.Presets = "unix/"+sock, modeForward, []string{"gmail"}
	})
	w := serve(t, h, hookRequest{target: "/hooks/gmail", body: `{"messages":[]}`, header: headers(auth, jsonCT)})
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%d %q %v", w.Code, w.Body, w.Header())
	}
}

// TestForwardAnyName: a forward mapping without match_path answers every
// hook name its other conditions admit and forwards to the name
// requested, escapes as sent, as the gateway's mapping without match.path
// runs for every name; names the gateway would read as another (dot
// segments) get 404.
func TestForwardAnyName(t *testing.T) {
	rec := recordTargets(t)
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway, h.Mode = "unix/"+rec.sock, modeForward
		h.Mappings = []Mapping{{ID: "beta", MatchSource: "beta", Forward: true}}
	})
	for _, tc := range []struct {
		target, body string
		status       int
	}{
		{"/hooks/anything-goes", `{"source":"beta"}`, 200},
		{"/hooks/a/b", `{"source":"beta"}`, 200},
		{"/hooks/other", `{"source":"alpha"}`, 404},
		{"/hooks/a%20b", `{"source":"beta"}`, 200},
		{"/hooks/%E2%9C%93", `{"source":"beta"}`, 200},
		{"/hooks/a/../b", `{"source":"beta"}`, 404},
		{"/hooks/a/%2E/b", `{"source":"beta"}`, 404},
	} {
		w := serve(t, h, hookRequest{target: tc.target, body: tc.body, header: headers(auth, jsonCT)})
		if w.Code != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.target, tc.body, w.Code, w.Body, tc.status)
		}
	}
	if got, want := rec.take(), []string{"/hooks/anything-goes", "/hooks/a/b", "/hooks/a%20b", "/hooks/%E2%9C%93"}; !slices.Equal(got, want) {
		t.Errorf("forwarded to %q, want %q", got, want)
	}
}

// TestWrapSides checks who wraps a rendered agent message: the edge by
// default in render mode, nobody at the edge with wrap gateway.
func TestWrapSides(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	for _, tc := range []struct {
		wrap    string
		wrapped bool
	}{{"", true}, {wrapByEdge, true}, {wrapByGW, false}} {
		t.Run("wrap "+tc.wrap, func(t *testing.T) {
			h := newTestHandler(t, gw, func(h *Handler) { h.Wrap = tc.wrap })
			n := len(gw.Received())
			if w := serve(t, h, hookRequest{target: "/hooks/agent", body: `{"message":"hello there"}`, header: headers(auth, jsonCT)}); w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			msg, _ := lastReceived(t, gw.Gateway, n).Body["message"].(string)
			if got := strings.Contains(msg, "EXTERNAL_UNTRUSTED_CONTENT"); got != tc.wrapped || !strings.Contains(msg, "hello there") {
				t.Fatalf("message %q: wrapped %v, want %v", msg, got, tc.wrapped)
			}
		})
	}
}
