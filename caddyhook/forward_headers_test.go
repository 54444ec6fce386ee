package caddyhook

import (
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestGatewayRest: the forwarded path is the sender's path below the base
// as the gateway's URL parser reads it (escapes kept as sent, the
// characters it encodes encoded, backslashes as slashes); a path the
// gateway would read as another name (dot segments, an escaped base) is
// not forwarded.
func TestGatewayRest(t *testing.T) {
	for _, tc := range []struct {
		target, want string
		ok           bool
	}{
		{"/hooks/github", "/github", true},
		{"/hooks/github?x=1#f", "/github", true},
		{"/hooks/%E2%9C%93", "/%E2%9C%93", true},
		{"/hooks/caf%c3%a9", "/caf%c3%a9", true},
		{"/hooks/%77ake", "/%77ake", true},
		{"/hooks/a%2Fb", "/a%2Fb", true},
		{"/hooks/a|b^c", "/a|b^c", true},
		{"/hooks/a\"b<c>`{d}", "/a%22b%3Cc%3E%60%7Bd%7D", true},
		{`/hooks/a\b`, "/a/b", true},
		{"/hooks/\xe2\x9c\x93", "/%E2%9C%93", true},
		{"/hooks//wake/", "//wake/", true},
		{"/hooks", "", true},
		{"http://example.com/hooks/x?y", "/x", true},
		{"/hooks/a/../b", "", false},
		{"/hooks/a/%2e%2E/b", "", false},
		{"/hooks/./b", "", false},
		{"/hooks/.%2e", "", false},
		{"/%68ooks/wake", "", false},
		{"/hooksx/wake", "", false},
		{"*", "", false},
	} {
		got, ok := gatewayRest(tc.target, "/hooks")
		if got != tc.want || ok != tc.ok {
			t.Errorf("gatewayRest(%q) = %q %v, want %q %v", tc.target, got, ok, tc.want, tc.ok)
		}
	}
}

// TestClassifyHeader pins the classes of the headers the issues name and
// of common provider headers, which must cross.
func TestClassifyHeader(t *testing.T) {
	for class, names := range map[headerClass][]string{
		headerCrosses: {"Content-Type", "User-Agent", "Accept", "Accept-Encoding", "X-Github-Event", "X-Github-Delivery",
			"X-Github-Hook-Id", "X-Gitlab-Event", "X-Event-Key", "X-Request-Id", "Idempotency-Key", "X-Openclaw-Idempotency-Key",
			"X-Idempotency-Key", "Webhook-Id", "Webhook-Timestamp", "X-Slack-Request-Timestamp", "X-Slack-Retry-Num",
			"Stripe-Version", "X-Kind", "X-Custom", "Sentry-Trace", "Baggage", "X-Amzn-Trace-Id", "Content-Language",
			"X-Shopify-Topic", "X-Goog-Resource-State", "Ce-Id", "Ce-Type", "X-Zip", "X-Tip", "X-Keyboard"},
		headerCredential: {"Authorization", "Proxy-Authorization", "X-Openclaw-Token", "X-Service-Token", "Cookie",
			"Set-Cookie", "X-Api-Key", "Api-Key", "Apikey", "Key", "X-Key", "X-Auth-Token", "X-Gitlab-Token", "X-Hub-Signature-256",
			"X-Hub-Signature", "Stripe-Signature", "X-Slack-Signature", "Webhook-Signature", "Svix-Signature", "X-Shopify-Hmac-Sha256",
			"Ocp-Apim-Subscription-Key", "X-Functions-Key", "X-Goog-Api-Key", "X-Access-Key", "X-Client-Secret", "X-Password",
			"X-Csrf-Token", "X-Xsrf-Token", "X-Amz-Security-Token", "X-Session-Id", "Www-Authenticate", "X-Jwt-Assertion",
			"Sec-Websocket-Key", "X-Sig", "Private-Key", "x_api_key", "X.Auth.Token"},
		headerForwarding: {"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded",
			"X-Original-Forwarded-For", "X-Real-Ip", "True-Client-Ip", "Cf-Connecting-Ip", "Cf-Connecting-Ipv6", "X-Client-Ip",
			"Client-Ip", "Fastly-Client-Ip", "X-Cluster-Client-Ip", "X-Envoy-External-Address", "X-Envoy-Internal",
			"X-Azure-Clientip", "X-Azure-Socketip", "X-Remote-Addr", "Remote-Addr", "X-Remote-User", "X-Originating-Ip",
			"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Original-Url", "X-Original-Uri",
			"X-Rewrite-Url", "X-Original-Method", "X-Host", "X-Http-Host-Override", "X-Forwarded-Server", "X-Scheme",
			"Front-End-Https", "X-Ssl-Client-Cert", "Via", "Tailscale-User-Login", "Cf-Access-Authenticated-User-Email",
			"X-Ms-Client-Principal-Name", "X-Amzn-Oidc-Identity", "X-Pomerium-Claim-Email", "X-Client-Address",
			"X-Proxyuser-Ip"},
		headerTransport: {"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
			"Host", "Content-Length", "Expect", "Http2-Settings"},
		headerTrace:   {"Traceparent", "Tracestate", "traceparent", "TRACESTATE"},
		headerInvalid: {"", "Bad Name", "X:Y", "X\nY", "Ünïcode"},
	} {
		for _, n := range names {
			if got, name := classifyHeader(n), classifyName(n); got != class || name != class {
				t.Errorf("classifyHeader(%q) = %d, classifyName %d, want %d", n, got, name, class)
			}
		}
	}
}

// crossingMarkers are name fragments that no crossing header may have
// (credential and forwarding words, in the lower-cased name without
// separators).
var crossingMarkers = []string{"auth", "token", "secret", "passw", "cookie", "signature", "apikey", "forwarded",
	"hmac", "jwt", "bearer", "csrf", "credential", "clientip", "realip", "override"}

// TestCrossingHeadersProperty: for arbitrary header sets, what crosses is
// a subset of what was sent, values as sent; nothing that crosses is a
// credential, forwarding, transport or trace header or one of the
// handler's own credential headers, whatever the case or separators of
// its name; every valid header of no such kind crosses; and what crosses
// stays within the bounds (else the request is refused with 431).
func TestCrossingHeadersProperty(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) {
		h.TokenHeaders = []string{"x-hook-alias"}
		h.Mappings = []Mapping{{ID: "gh", MatchPath: "github", Forward: true, Verify: githubConfig(sigGitHubSecret)}}
	})
	words := []string{"x", "github", "event", "delivery", "auth", "token", "api", "key", "secret", "client", "ip",
		"forwarded", "for", "real", "original", "url", "method", "override", "idempotency", "request", "id", "trace",
		"parent", "state", "cookie", "signature", "hub", "256", "session", "remote", "addr", "via", "content", "type",
		"hook", "alias", "user", "agent", "ms", "host", "connection", "envoy", "tailscale", "hmac", "pass", "word"}
	seps := []string{"-", "_", ".", ""}
	gen := func(rnd *rand.Rand) http.Header {
		hdr := http.Header{}
		for range rnd.IntN(12) {
			var b strings.Builder
			for i := range rnd.IntN(4) + 1 {
				if i > 0 {
					b.WriteString(seps[rnd.IntN(len(seps))])
				}
				w := words[rnd.IntN(len(words))]
				if rnd.IntN(3) == 0 {
					w = strings.ToUpper(w)
				}
				b.WriteString(w)
			}
			v := strings.Repeat("v", rnd.IntN(40))
			switch rnd.IntN(20) {
			case 0:
				v += "\x01"
			case 1:
				v = strings.Repeat("w", 4<<10)
			}
			hdr[b.String()] = append(hdr[b.String()], v)
		}
		return hdr
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	refused := 0
	for range 5000 {
		r := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
		r.Header = gen(rnd)
		listed := map[string]bool{}
		if names := slices.Sorted(maps.Keys(r.Header)); len(names) > 0 && rnd.IntN(4) == 0 {
			r.Header["Connection"] = []string{"close, " + names[0]}
			listed[http.CanonicalHeaderKey(names[0])] = true
		}
		got, herr := crossingHeaders(r, "/hooks/github", h.forwarder.skip)
		size := len("/hooks/github") + len("Host: \r\n") + len(r.Host)
		for k, vs := range r.Header {
			if classifyHeader(k) == headerCrosses && !h.forwarder.skip[http.CanonicalHeaderKey(k)] && allValid(vs) && !listed[http.CanonicalHeaderKey(k)] {
				for _, v := range vs {
					size += len(k) + len(v) + len(": \r\n")
				}
			}
		}
		if herr != nil {
			if herr.status != http.StatusRequestHeaderFieldsTooLarge || size <= maxForwardHeaderBytes {
				t.Fatalf("%d bytes refused: %+v", size, herr)
			}
			refused++
			continue
		}
		if size > maxForwardHeaderBytes {
			t.Fatalf("%d bytes crossed the %d bound", size, maxForwardHeaderBytes)
		}
		for k, vs := range got {
			if k == "Host" {
				if len(vs) != 1 || vs[0] != r.Host {
					t.Fatalf("Host %q, want %q", vs, r.Host)
				}
				continue
			}
			if !slices.Equal(vs, r.Header[k]) {
				t.Fatalf("%s: %q crossed as %q", k, r.Header[k], vs)
			}
			lower := strings.ToLower(strings.NewReplacer("-", "", "_", "", ".", "").Replace(k))
			for _, m := range crossingMarkers {
				if strings.Contains(lower, m) {
					t.Fatalf("%s crossed (it mentions %q)", k, m)
				}
			}
			if c := classifyHeader(k); c != headerCrosses || h.forwarder.skip[http.CanonicalHeaderKey(k)] || !allValid(vs) || listed[http.CanonicalHeaderKey(k)] {
				t.Fatalf("%s (class %d) crossed", k, c)
			}
		}
		for k, vs := range r.Header {
			if classifyHeader(k) == headerCrosses && !h.forwarder.skip[http.CanonicalHeaderKey(k)] && allValid(vs) && !listed[http.CanonicalHeaderKey(k)] {
				if _, crossed := got[k]; !crossed {
					t.Fatalf("%s: %q did not cross", k, vs)
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no generated request went over the bounds: the generator does not reach them")
	}
}

// TestCrossingHeadersValues: a crossing value is the request's slice with
// its capacity clipped (appending to it never changes the request's).
func TestCrossingHeadersValues(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	r := httptest.NewRequest(http.MethodPost, "/hooks/x", nil)
	r.Header["X-Custom"] = append(make([]string, 0, 4), "a", "b")
	got, _ := crossingHeaders(r, "/hooks/x", h.forwarder.skip)
	v := append(got["X-Custom"], "c")
	v[0] = "changed"
	if r.Header["X-Custom"][0] != "a" {
		t.Fatal("appending to a forwarded value changes the request's")
	}
}

// BenchmarkClassifyHeader measures the per-header cost of the rule, for
// common headers (one lookup) and for others (the whole rule).
func BenchmarkClassifyHeader(b *testing.B) {
	for _, bc := range []struct {
		name  string
		names []string
	}{
		{"common", []string{"Content-Type", "User-Agent", "X-Github-Event", "Authorization", "X-Forwarded-For", "Idempotency-Key", "Accept-Encoding"}},
		{"other", []string{"X-Shopify-Topic", "X-Custom-Thing", "X-Api-Key", "True-Client-Ip", "X-Event-Key", "Ce-Type", "X-Azure-Clientip"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				classifyHeader(bc.names[i%len(bc.names)])
			}
		})
	}
}

// TestForwardDropsTokenHeaders: a forwarded request never carries a token
// header, token_headers aliases included.
func TestForwardDropsTokenHeaders(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.TokenHeaders = []string{"x-hook-alias"} })
	r := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
	r.Header = http.Header{"X-Hook-Alias": {"t"}, "X-Service-Token": {"t"}, "Authorization": {"Bearer t"},
		"X-Github-Event": {"push"}}
	got, herr := crossingHeaders(r, "/hooks/github", h.forwarder.skip)
	if herr != nil || len(got) != 2 || got.Get("X-Github-Event") != "push" || got.Get("Host") != "example.com" {
		t.Fatalf("forwarded headers %v (%v)", got, herr)
	}
}
