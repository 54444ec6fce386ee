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
			"X-Shopify-Topic", "X-Goog-Resource-State", "Ce-Id", "Ce-Type", "X-Zip", "X-Tip", "X-Keyboard",
			// D30 of issue 35: ordinary vendor headers the word lists stopped
			"X-Github-Enterprise-Host", "X-Author", "X-Payment-Method", "I-Twilio-Idempotency-Token",
			"X-Signature-Timestamp", "X-Correlation-Key", "X-Ip-Country", "X-Remote-Branch", "X-Original-Sender",
			"X-Github-Enterprise-Version", "X-Page-Token", "Signature-Input", "X-Mailgun-Address", "X-Email"},
		headerCredential: {"Authorization", "Proxy-Authorization", "X-Openclaw-Token", "X-Service-Token", "Cookie",
			"Set-Cookie", "X-Api-Key", "Api-Key", "Apikey", "Key", "X-Key", "X-Auth-Token", "X-Gitlab-Token", "X-Hub-Signature-256",
			"X-Hub-Signature", "Stripe-Signature", "X-Slack-Signature", "Webhook-Signature", "Svix-Signature", "X-Shopify-Hmac-Sha256",
			"Ocp-Apim-Subscription-Key", "X-Functions-Key", "X-Goog-Api-Key", "X-Access-Key", "X-Client-Secret", "X-Password",
			"X-Csrf-Token", "X-Xsrf-Token", "X-Amz-Security-Token", "X-Session-Id", "Www-Authenticate", "X-Jwt-Assertion",
			"Sec-Websocket-Key", "X-Sig", "Private-Key", "x_api_key", "X.Auth.Token",
			// B13 of issue 34: one-time codes and compounds
			"X-Otp", "X-Totp", "X-Mfa", "X-2fa", "X-Passcode", "X-Authtoken", "X-Access-Token", "Authentication",
			"X-Authenticated-Userid", "X-Signature", "X-Token-Type", "X-Verification-Token", "Jsessionid"},
		headerForwarding: {"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded",
			"X-Original-Forwarded-For", "X-Real-Ip", "True-Client-Ip", "Cf-Connecting-Ip", "Cf-Connecting-Ipv6", "X-Client-Ip",
			"Client-Ip", "Fastly-Client-Ip", "X-Cluster-Client-Ip", "X-Envoy-External-Address", "X-Envoy-Internal",
			"X-Azure-Clientip", "X-Azure-Socketip", "X-Remote-Addr", "Remote-Addr", "X-Remote-User", "X-Originating-Ip",
			"X-Http-Method-Override", "X-Http-Method", "X-Method-Override", "X-Original-Url", "X-Original-Uri",
			"X-Rewrite-Url", "X-Original-Method", "X-Host", "X-Http-Host-Override", "X-Forwarded-Server", "X-Scheme",
			"Front-End-Https", "X-Ssl-Client-Cert", "Via", "Tailscale-User-Login", "Cf-Access-Authenticated-User-Email",
			"X-Ms-Client-Principal-Name", "X-Amzn-Oidc-Identity", "X-Pomerium-Claim-Email", "X-Client-Address",
			"X-Proxyuser-Ip",
			// B13 of issue 34: identity headers a proxy in front asserts
			"Client-Cert", "X-Arr-Clientcert", "X-Vouch-User", "X-Consumer-Username", "X-Remote-Groups", "Remote-User",
			"X-Auth-Request-User", "X-Webauth-User", "X-User", "X-User-Id", "X-Userinfo", "X-Apigateway-Api-Userinfo",
			"X-Mtls-Client-Cert", "X-Tls-Client-Subject", "X-Client-Cert-Chain", "Ssl-Client-Verify", "X-Client-Verify",
			"X-Principal", "X-Identity", "Impersonate-User", "X-Roles", "X-Groups", "X-Consumer-Id",
			"X-Anonymous-Consumer", "X-Credential-Identifier", "X-Real-Port", "X-Original-Host"},
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

// crossingMarkers are words that no crossing header's name may have
// (split at separators, lower-cased), unless the word after says it is no
// credential (a signature's timestamp, an idempotency token: D30).
var crossingMarkers = []string{"auth", "secret", "password", "cookie", "apikey", "forwarded", "hmac", "jwt",
	"bearer", "csrf", "credential", "clientip", "realip", "override", "session", "user", "via"}

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
			ws := strings.FieldsFunc(strings.ToLower(k), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
			for i, w := range ws {
				if slices.Contains(crossingMarkers, w) && !(w == "user" && i+1 < len(ws) && ws[i+1] == "agent") {
					t.Fatalf("%s crossed (it has the word %q)", k, w)
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

// TestHeaderNameRuleProperty: the name rule is right in both directions
// (D30 of issue 35, B13 of issue 34). Names are generated from a vendor
// prefix, ordinary words (some of them the letters of a credential:
// author, payment-method, enterprise-host, idempotency-token, …) and, for
// half of them, one marker phrase (a credential, an identity or a
// proxy's assertion, as real proxies and gateways spell them), in any
// case and with any separator: a name crosses exactly when it has no
// marker.
func TestHeaderNameRuleProperty(t *testing.T) {
	prefixes := []string{"x", "github", "stripe", "twilio", "i-twilio", "x-shopify", "x-gitea", "ce", "x-acme"}
	ordinary := []string{"event", "delivery", "id", "author", "payment-method", "enterprise-host", "enterprise-version",
		"idempotency-token", "correlation-key", "signature-timestamp", "ip-country", "remote-branch", "original-sender",
		"topic", "retry-num", "request-id", "hook", "target-type", "page-token", "event-key", "keyboard", "tip",
		"zip", "user-agent", "host-name-check", "method-name", "country", "timestamp", "version", "sender", "branch"}
	// markers: the phrase, and whether it must end the name (a key,
	// token or address is read from the last word)
	markers := []struct {
		phrase string
		last   bool
	}{
		{"auth", false}, {"auth-token", true}, {"authtoken", false}, {"access-token", true}, {"api-key", true},
		{"apikey", false}, {"secret", false}, {"password", false}, {"cookie", false}, {"signature", true},
		{"sig", true}, {"hmac-sha256", false}, {"session-id", false}, {"jwt", false}, {"bearer", false},
		{"otp", false}, {"totp", false}, {"mfa", false}, {"passcode", false}, {"credential", false},
		{"client-ip", true}, {"clientip", false}, {"real-ip", true}, {"ip", true}, {"remote-addr", true},
		{"client-address", true}, {"forwarded-for", false}, {"via", false}, {"method-override", false},
		{"http-method", false}, {"original-url", false}, {"original-host", false}, {"rewrite-url", false},
		{"remote-user", false}, {"user", false}, {"user-id", false}, {"username", false}, {"userinfo", false},
		{"client-cert", false}, {"clientcert", false}, {"ssl-client-verify", false}, {"vouch-user", false},
		{"consumer-username", false}, {"consumer-id", false}, {"principal", false}, {"identity", false},
		{"groups", false}, {"oidc-data", false}, {"private-key", true}, {"subscription-key", true},
	}
	seps := []string{"-", "_", "."}
	style := func(rnd *rand.Rand, phrase string, sep string) string {
		p := strings.ReplaceAll(phrase, "-", sep)
		switch rnd.IntN(3) {
		case 0:
			return strings.ToUpper(p)
		case 1:
			return http.CanonicalHeaderKey(p)
		}
		return p
	}
	rnd := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		sep := seps[rnd.IntN(len(seps))]
		parts := []string{prefixes[rnd.IntN(len(prefixes))]}
		for range rnd.IntN(3) {
			parts = append(parts, ordinary[rnd.IntN(len(ordinary))])
		}
		if rnd.IntN(3) == 0 || len(parts) == 1 {
			parts = append(parts, ordinary[rnd.IntN(len(ordinary))])
		}
		marked := rnd.IntN(2) == 0
		if marked {
			m := markers[rnd.IntN(len(markers))]
			at := len(parts)
			if !m.last {
				at = 1 + rnd.IntN(len(parts))
			}
			parts = slices.Insert(parts, at, m.phrase)
		}
		for i := range parts {
			parts[i] = style(rnd, parts[i], sep)
		}
		name := strings.Join(parts, sep)
		if got := classifyName(name); (got == headerCrosses) == marked {
			t.Fatalf("classifyName(%q) = %d; marked %v", name, got, marked)
		}
	}
}
