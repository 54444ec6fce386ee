package caddyhook

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// What a forwarded request carries to the gateway (issues 26, 20 item 9,
// 21 item 4), asserted on what the gateway (devgw, recording) receives, in
// both dispatch paths a forwarded request meets: sync and a local spool.

// forwardPathHooks is the hooks block of these tests: forward mode with
// the gateway's idempotency alias, the hook token's x-openclaw-token
// alias, a default session key, a forward mapping and a source-only one.
const forwardPathHooks = `mode forward
		agents main
		allow_request_session_key
		allowed_session_key_prefixes hook:
		default_session_key hook:edge
		token_headers x-openclaw-token
		idempotency_headers x-openclaw-idempotency-key
		mapping github {
			match_path github
			forward
		}
		mapping beta {
			match_source beta
			forward
		}`

// forwardDispatch is one dispatch path: its name and the hooks lines it
// adds.
type forwardDispatch struct {
	name, hooks string
	spooled     bool
}

// forwardDispatches are sync and a local spool (retried fast).
func forwardDispatches(t *testing.T) []forwardDispatch {
	return []forwardDispatch{
		{name: "sync"},
		{name: "spool", spooled: true, hooks: "\n\t\tspool " + t.TempDir() + " {\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}"},
	}
}

// eachForwardDispatch runs fn once per dispatch path, against an ingress
// with forwardPathHooks.
func eachForwardDispatch(t *testing.T, fn func(t *testing.T, in *ingress, d forwardDispatch)) {
	for _, d := range forwardDispatches(t) {
		t.Run(d.name, func(t *testing.T) {
			fn(t, startIngress(t, ingressOpts{hooks: forwardPathHooks + d.hooks}), d)
		})
	}
}

// forwarded sends an authenticated POST, demands 200, and returns the
// gateway's record of it (with a spool, once delivered).
func (in *ingress) forwarded(path, body string, hdr ...string) (result, devgw.Received) {
	in.t.Helper()
	n := len(in.gw.Received())
	r := in.post(path, body, hdr...)
	if r.status != http.StatusOK {
		in.t.Fatalf("%s: %d %s", path, r.status, r.body)
	}
	testkit.WaitForState(in.t, func() string { return path + " never reached the gateway" }, func() bool { return len(in.gw.Received()) > n })
	return r, lastReceived(in.t, in.gw, n)
}

// TestForwardQueryAsSent (issue 26 item 1): every query parameter reaches
// the gateway as sent, credential-like names included (a mapping reads
// {{query.key}}); only the edge's own token parameter is refused.
func TestForwardQueryAsSent(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		q := "key=k1&auth=a1&sig=s1&signature=s2&password=p1&access_token=t1&myToken=t2&apiKey=x&q=a%20b&&e=1;f=2"
		_, rec := in.forwarded("/hooks/github?"+q, `{}`)
		if rec.Query != q || rec.Path != "github" {
			t.Fatalf("gateway got %s?%s, want github?%s", rec.Path, rec.Query, q)
		}
		_, rec = in.forwarded("/hooks/agent?key=k", `{"message":"m"}`)
		if rec.Query != "key=k" {
			t.Fatalf("agent query %q", rec.Query)
		}
		n := len(in.gw.Received())
		if r := in.post("/hooks/github?token=x", `{}`); r.status != http.StatusBadRequest {
			t.Fatalf("?token=: %d %s", r.status, r.body)
		}
		if r := in.post("/hooks/github?k="+itHookToken, `{}`); r.status != http.StatusBadRequest {
			t.Fatalf("the hook token as a parameter value: %d %s", r.status, r.body)
		}
		if len(in.gw.Received()) != n {
			t.Fatal("a request with the token in its URL reached the gateway")
		}
	})
}

// TestForwardEscapedHookName (issue 26 item 2): a hook name that needs
// escaping reaches a mapping without match_path, under the name the
// gateway reads (escapes as sent); a path the gateway would resolve into
// another name is not forwarded.
func TestForwardEscapedHookName(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		for _, target := range []string{"/hooks/%E2%9C%93", "/hooks/caf%c3%a9/x", "/hooks/a%20b", "/hooks/a%2Fb?q=1"} {
			_, rec := in.forwarded(target, `{"source":"beta"}`)
			if rec.Target != target {
				t.Errorf("%s reached the gateway as %s", target, rec.Target)
			}
		}
		n := len(in.gw.Received())
		for _, target := range []string{"/hooks/a/../b", "/hooks/a/%2e%2e/b", "/hooks/%E2%9C%93"} {
			body := `{"source":"beta"}`
			if strings.Contains(target, "%E2") {
				body = `{"source":"gamma"}` // no mapping matches
			}
			if r := in.post(target, body); r.status != http.StatusNotFound {
				t.Errorf("%s %s: %d %s, want 404", target, body, r.status, r.body)
			}
		}
		if len(in.gw.Received()) != n {
			t.Fatal("an unforwardable or unmapped hook reached the gateway")
		}
	})
}

// TestForwardHeadersAsSent (issue 26 item 3): the gateway's templates see
// the sender's Host, its User-Agent or none, and its idempotency headers
// under the names it used; an Idempotency-Key the sender did not send is
// added only with a spool (for redelivery), and only when the gateway
// would find no key of the sender's.
func TestForwardHeadersAsSent(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, d forwardDispatch) {
		host := strings.TrimPrefix(in.base, "http://")
		r, rec := in.forwarded("/hooks/github", `{}`, "User-Agent:")
		if rec.Host != host {
			t.Errorf("Host %q, want the sender's %q", rec.Host, host)
		}
		if ua, sent := rec.Header["User-Agent"]; sent {
			t.Errorf("User-Agent %q added; the sender sent none", ua)
		}
		key, sent := rec.Header["Idempotency-Key"]
		switch {
		case !d.spooled && sent:
			t.Errorf("Idempotency-Key %q added; the sender sent none", key)
		case d.spooled && (len(key) != 1 || key[0] != r.json(t)["runId"]):
			t.Errorf("spooled: Idempotency-Key %q, want the event id %v", key, r.json(t)["runId"])
		}

		_, rec = in.forwarded("/hooks/github", `{}`, "User-Agent: GitHub-Hookshot/1", "X-OpenClaw-Idempotency-Key: k-oc")
		if rec.Header.Get("User-Agent") != "GitHub-Hookshot/1" || rec.Header.Get("X-Openclaw-Idempotency-Key") != "k-oc" {
			t.Errorf("headers %v", rec.Header)
		}
		if key, sent := rec.Header["Idempotency-Key"]; sent {
			t.Errorf("Idempotency-Key %q added beside the sender's X-OpenClaw-Idempotency-Key", key)
		}
		_, rec = in.forwarded("/hooks/agent", `{"message":"m","idempotencyKey":"k-body"}`)
		if key, sent := rec.Header["Idempotency-Key"]; sent || rec.IdempotencyKey != "k-body" {
			t.Errorf("Idempotency-Key %q added beside the body's idempotencyKey (gateway key %q)", key, rec.IdempotencyKey)
		}
		_, rec = in.forwarded("/hooks/wake", `{"text":"t"}`, "Idempotency-Key:  k-own ")
		if got := rec.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != "k-own" {
			t.Errorf("the sender's Idempotency-Key arrived as %q", got)
		}
	})
}

// TestForwardCredentialHeadersNeverCross (issue 26 item 6): no credential
// header of the sender's reaches the gateway, whatever its name; the
// gateway gets the edge's own Authorization only.
func TestForwardCredentialHeadersNeverCross(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		creds := []string{"X-Api-Key: ak", "Cookie: sid=1", "X-Auth-Token: at", "X-Gitlab-Token: gt", "Proxy-Authorization: Basic x",
			"X-Hub-Signature-256: sha256=00", "Stripe-Signature: t=1,v1=00", "X-Service-Token: " + itHookToken, "X-Csrf-Token: c",
			"Ocp-Apim-Subscription-Key: sk", "X-Session-Id: s"}
		for _, sender := range []string{"Authorization: Bearer " + itHookToken, "X-OpenClaw-Token: " + itHookToken} {
			hdr := append([]string{sender, "X-GitHub-Event: push"}, creds...)
			n := len(in.gw.Received())
			r := in.do(http.MethodPost, "/hooks/github", `{}`, hdr...)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			testkit.WaitForState(t, func() string { return "not delivered" }, func() bool { return len(in.gw.Received()) > n })
			rec := lastReceived(t, in.gw, n)
			if rec.Header.Get("X-Github-Event") != "push" {
				t.Fatalf("provider header lost: %v", rec.Header)
			}
			if got := rec.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+itGatewayToken {
				t.Errorf("Authorization %q, want the edge's own only", got)
			}
			for _, c := range append([]string{"X-OpenClaw-Token: "}, creds...) {
				name, _, _ := strings.Cut(c, ":")
				if v, ok := rec.Header[http.CanonicalHeaderKey(name)]; ok {
					t.Errorf("%s crossed: %q", name, v)
				}
			}
			for k, v := range rec.Header {
				if strings.Contains(strings.Join(v, " "), itHookToken) {
					t.Errorf("the hook token crossed in %s", k)
				}
			}
		}
	})
}

// TestForwardForwardingHeadersNeverCross (issue 20 item 9): client-address,
// forwarding and override headers never reach the gateway, nor a
// malformed traceparent (with its tracestate) or an over-long tracestate;
// a well-formed trace context does.
func TestForwardForwardingHeadersNeverCross(t *testing.T) {
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	dropped := []string{"True-Client-IP: 203.0.113.1", "CF-Connecting-IP: 203.0.113.2", "X-Client-IP: 203.0.113.3",
		"Client-IP: 203.0.113.4", "Fastly-Client-IP: 203.0.113.5", "X-Cluster-Client-IP: 203.0.113.6",
		"X-Original-Forwarded-For: 203.0.113.7", "X-Forwarded: for=203.0.113.8", "X-Envoy-External-Address: 203.0.113.9",
		"X-Azure-ClientIP: 203.0.113.10", "X-Real-IP: 203.0.113.11", "Forwarded: for=203.0.113.12", "X-Forwarded-For: 203.0.113.13",
		"X-HTTP-Method-Override: DELETE", "X-HTTP-Method: PUT", "X-Method-Override: PATCH", "X-Original-URL: /admin",
		"X-Rewrite-URL: /admin", "Via: 1.1 proxy", "Tailscale-User-Login: someone"}
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		for _, tc := range []struct {
			name          string
			hdr           []string
			parent, state string // what the gateway must get
		}{
			{"client address and override headers", append([]string{"X-Custom: kept"}, dropped...), "", ""},
			{"malformed traceparent", []string{"X-Custom: kept", "Traceparent: 00-xyz", "Tracestate: a=b"}, "", ""},
			{"over-long tracestate", []string{"X-Custom: kept", "Traceparent: " + parent, "Tracestate: a=" + strings.Repeat("b", 10<<10)}, parent, ""},
			{"well-formed trace context", []string{"X-Custom: kept", "Traceparent: " + parent, "Tracestate: a=b"}, parent, "a=b"},
		} {
			_, rec := in.forwarded("/hooks/github", `{}`, tc.hdr...)
			if rec.Header.Get("X-Custom") != "kept" || rec.TraceParent != tc.parent || rec.TraceState != tc.state {
				t.Errorf("%s: X-Custom %q, traceparent %q, tracestate %.40q", tc.name, rec.Header.Get("X-Custom"), rec.TraceParent, rec.TraceState)
			}
			for _, d := range dropped {
				name, _, _ := strings.Cut(d, ":")
				if v, ok := rec.Header[http.CanonicalHeaderKey(name)]; ok {
					t.Errorf("%s: %s crossed: %q", tc.name, name, v)
				}
			}
		}
	})
}

// TestForwardHeaderBound: a request whose headers would go past what the
// gateway's parser accepts is refused with 431 before it is accepted
// (never spooled for a gateway that refuses it).
func TestForwardHeaderBound(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		var hdr []string
		for i := range 4 {
			hdr = append(hdr, "X-Big-"+string(rune('a'+i))+": "+strings.Repeat("v", 4<<10))
		}
		n := len(in.gw.Received())
		if r := in.post("/hooks/github", `{}`, hdr...); r.status != http.StatusRequestHeaderFieldsTooLarge || r.json(t)["error"] != reasonHeadersTooLarge {
			t.Fatalf("%d %s, want 431", r.status, r.body)
		}
		in.forwarded("/hooks/github", `{}`, hdr[:3]...) // 12 KiB: forwarded
		if got := len(in.gw.Received()); got != n+1 {
			t.Fatalf("gateway received %d requests, want 1", got-n)
		}
	})
}

// TestForwardDefaultSessionKeyWins (issue 21 item 4): the edge's
// default_session_key reaches the gateway even when the sender's body has
// a sessionKey the policy reads as none (null, "", blank), which the
// gateway would otherwise read last.
func TestForwardDefaultSessionKeyWins(t *testing.T) {
	eachForwardDispatch(t, func(t *testing.T, in *ingress, _ forwardDispatch) {
		for _, body := range []string{`{"message":"m","sessionKey":null}`, `{"message":"m","sessionKey":""}`,
			`{"message":"m","sessionKey":"  "}`, `{"sessionKey":"hook:own","message":"m","sessionKey":null}`, `{"message":"m"}`} {
			_, rec := in.forwarded("/hooks/agent", body)
			if rec.Body["sessionKey"] != "hook:edge" {
				t.Errorf("%s: the gateway read sessionKey %v (%s), want hook:edge", body, rec.Body["sessionKey"], rec.Raw)
			}
		}
		if _, rec := in.forwarded("/hooks/agent", `{"message":"m","sessionKey":"hook:own"}`); rec.Body["sessionKey"] != "hook:own" {
			t.Errorf("the sender's own key became %v", rec.Body["sessionKey"])
		}
	})
}

// TestForwardRawTargetRefused (issue 26 item 5): a request target with raw
// non-ASCII bytes is refused with 400, as the gateway's HTTP parser
// refuses it, before anything else.
func TestForwardRawTargetRefused(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: forwardPathHooks})
	addr := strings.TrimPrefix(in.base, "http://")
	for _, target := range []string{"/hooks/\u2713", "/hooks/github?q=\u2713"} {
		a := rawRequest("tcp", addr, "POST "+target+" HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+itHookToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		if a.err != nil || a.status != http.StatusBadRequest {
			t.Errorf("%q: %d %v, want 400", target, a.status, a.err)
		}
	}
	if len(in.gw.Received()) != 0 {
		t.Fatal("a raw non-ASCII target reached the gateway")
	}
}

// TestForwardSpoolStoresNoGatewayCredential: a forwarded event that failed
// an attempt is stored again without what the gateway client added to
// its headers (the edge's gateway credential never reaches the spool
// file).
func TestForwardSpoolStoresNoGatewayCredential(t *testing.T) {
	dir := t.TempDir()
	in, adm := startOpsIngress(t, ingressOpts{hooks: forwardPathHooks + "\n\t\tspool " + dir + " {\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}"})
	in.gw.FailWith(func(string) int { return http.StatusConflict }) // a 4xx: dead letter at once
	if r := in.post("/hooks/github", `{}`, "X-GitHub-Event: push"); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	testkit.WaitForState(t, func() string { return "no dead letter" }, func() bool { return adm.status("").Spool.DeadLetters == 1 })
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), itGatewayToken) {
			t.Fatalf("%s holds the gateway token", f)
		}
	}
}
