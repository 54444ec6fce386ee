package caddyhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// TestScanTarget covers the URL shapes of issue 17 item 9: which carry the
// token (refused with 400) and which only need redacting in the access log.
func TestScanTarget(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.Tokens = []string{utHookToken + "-second"} })
	tok := utHookToken
	for _, tc := range []struct {
		target         string
		refuse, redact bool
		redacted       string // "" = unchanged
	}{
		{target: "/hooks/wake"},
		{target: "/hooks/wake?a=1&b=2"},
		{target: "/hooks/wake?tokens=1", redact: true, redacted: "/hooks/wake?tokens=REDACTED"},
		{target: "/hooks/wake?token=x", refuse: true, redact: true, redacted: "/hooks/wake?token=REDACTED"},
		{target: "/hooks/wake?TOKEN=x&a=1", refuse: true, redact: true, redacted: "/hooks/wake?TOKEN=REDACTED&a=1"},
		{target: "/hooks/wake;token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake;token=REDACTED"},
		{target: "/hooks/wake?a=1;token=x", refuse: true, redact: true, redacted: "/hooks/wake?a=1;token=REDACTED"},
		{target: "/hooks/wake?a=1#token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?a=1#token=REDACTED"},
		{target: "/hooks/wake#token=x", refuse: true, redact: true, redacted: "/hooks/wake#token=REDACTED"},
		{target: "/hooks/wake?token+=x", refuse: true, redact: true, redacted: "/hooks/wake?token+=REDACTED"},
		{target: "/hooks/wake?+token%20=x", refuse: true, redact: true, redacted: "/hooks/wake?+token%20=REDACTED"},
		{target: "/hooks/wake?t%6Fken=x", refuse: true, redact: true, redacted: "/hooks/wake?t%6Fken=REDACTED"},
		{target: "/hooks/wake?access_token=other", redact: true, redacted: "/hooks/wake?access_token=REDACTED"},
		{target: "/hooks/wake?access%5Ftoken=other", redact: true, redacted: "/hooks/wake?access%5Ftoken=REDACTED"},
		{target: "/hooks/wake?access_token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?access_token=REDACTED"},
		{target: "/hooks/wake?x=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + tok + "-second", refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + url.QueryEscape(" "+tok+" "), refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + strings.ReplaceAll(tok, "-", "%2d"), refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?" + tok, refuse: true, redact: true, redacted: "/hooks/wake?REDACTED"},
		{target: "/hooks/" + tok, refuse: true, redact: true, redacted: "/hooks/REDACTED"},
		{target: "/hooks/" + tok + "/x?y=1", refuse: true, redact: true, redacted: "/hooks/REDACTED/x?y=1"},
		{target: "/hooks/x?y=" + tok + "x"},
		{target: "/hooks/wake?&&;#", redacted: ""},
	} {
		refuse, redact := h.tokens.scanTarget(tc.target)
		if refuse != tc.refuse || redact != tc.redact {
			t.Errorf("scanTarget(%q) = %v, %v; want %v, %v", tc.target, refuse, redact, tc.refuse, tc.redact)
		}
		want := tc.redacted
		if want == "" {
			want = tc.target
		}
		if got := h.tokens.redactTarget(tc.target); got != want {
			t.Errorf("redactTarget(%q) = %q, want %q", tc.target, got, want)
		}
	}
}

// TestScanTargetNoAlloc: the check runs on every request.
func TestScanTargetNoAlloc(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	for _, target := range []string{"/hooks/wake", "/hooks/github?a=1&b=2&page=3"} {
		if n := testing.AllocsPerRun(100, func() { h.tokens.scanTarget(target) }); n != 0 {
			t.Errorf("scanTarget(%q) allocates %v times", target, n)
		}
	}
}

// FuzzRedactTarget: redacting never panics, never leaves the token in, and
// keeps every target that needs no redacting unchanged.
func FuzzRedactTarget(f *testing.F) {
	for _, s := range []string{"/hooks/wake?token=x", "/hooks/a;b#c?d&e=f", "/%zz?%zz=%zz", "?+=+", "/hooks/" + utHookToken, "#;?&="} {
		f.Add(s)
	}
	h := newTestHandler(f, nil, nil)
	f.Fuzz(func(t *testing.T, target string) {
		refuse, redact := h.tokens.scanTarget(target)
		out := h.tokens.redactTarget(target)
		if strings.Contains(out, utHookToken) {
			t.Fatalf("redactTarget(%q) = %q keeps the token", target, out)
		}
		if refuse && !redact {
			t.Fatalf("refused but not redacted: %q", target)
		}
		if !redact && out != target && utf8.ValidString(target) {
			t.Fatalf("redactTarget changed %q to %q though nothing needs redacting", target, out)
		}
	})
}

// TestGatewayOutcomeSanitised (issue 17 item 13): the gateway's 4xx text
// is passed on sanitised and capped; one with nothing left is a 502.
func TestGatewayOutcomeSanitised(t *testing.T) {
	body := func(msg string) []byte { b, _ := json.Marshal(map[string]any{"ok": false, "error": msg}); return b }
	for _, tc := range []struct {
		msg    string
		status int
		reason string
	}{
		{"sessionKey is invalid", 400, "gateway: sessionKey is invalid"},
		{"forged\n{\"level\":\"error\"}", 400, `gateway: forged {"level":"error"}`},
		{strings.Repeat("x", 5000), 400, "gateway: " + strings.Repeat("x", 200) + "…"},
		{"\r\n", 502, "gateway error (status 400)"},
	} {
		herr := answer(gatewayReply{status: 400, body: body(tc.msg)}, nil, false)
		if herr == nil || herr.status != tc.status || herr.reason != tc.reason {
			t.Errorf("outcome(%q) = %+v, want %d %q", tc.msg, herr, tc.status, tc.reason)
		}
	}
}

// TestVerifierOffered: a request without its scheme's signature header is
// refused from the headers alone, with the reason Verify would give.
func TestVerifierOffered(t *testing.T) {
	for _, tc := range []struct {
		cfg    verify.Config
		hdr    http.Header
		offers bool
	}{
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature-256": {"sha256=00"}}, true},
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature": {"sha1=00"}}, false},
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature-256": {"  "}}, false},
		{*githubConfig(sigGitHubSecret), http.Header{}, false},
		{verify.Config{Scheme: "stripe", Secrets: []string{sigStripeSecret}}, http.Header{"Stripe-Signature": {"t=1,v1=00"}}, true},
		{verify.Config{Scheme: "standard", Secrets: []string{sigStandardSecret}}, http.Header{"Svix-Signature": {"v1,AA=="}}, true},
		{verify.Config{Scheme: "hmac", Secrets: []string{sigHMACSecret}, Header: "x-acme-signature"}, http.Header{"X-Acme-Signature": {"00"}}, true},
	} {
		v, err := verify.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Offered(tc.hdr)
		if (err == nil) != tc.offers {
			t.Errorf("%s %v: Offered = %v, want offered %v", tc.cfg.Scheme, tc.hdr, err, tc.offers)
		}
		if _, verr := v.Verify(tc.hdr, nil, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)); err != nil && (verr == nil || verr.Error() != err.Error()) {
			t.Errorf("%s %v: Offered says %v, Verify %v", tc.cfg.Scheme, tc.hdr, err, verr)
		}
	}
}

// TestClientAddressProblem (issue 17 items 3, 4): the server settings the
// lockout cannot key on are refused. trusted_proxies and the listener
// wrappers are read from the provisioned server (their raw JSON is gone by
// then): the test runs real servers, so a Caddy upgrade that hides them
// fails here.
func TestClientAddressProblem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		server   string // JSON
		want     error
		leftmost bool
	}{
		{name: "plain", server: `{"listen":["127.0.0.1:0"]}`},
		{name: "trusted strict", server: `{"listen":["127.0.0.1:0"],"trusted_proxies":{"source":"static","ranges":["10.0.0.0/8"]},"trusted_proxies_strict":1}`},
		{name: "trusted not strict", server: `{"listen":["127.0.0.1:0"],"trusted_proxies":{"source":"static","ranges":["10.0.0.0/8"]}}`, want: errLeftmostForwarded},
		{name: "unix", server: `{"listen":["unix/%s/c.sock"]}`, want: errUnixNoProxy},
		{name: "unix and tcp", server: `{"listen":["127.0.0.1:0","unix/%s/c.sock"]}`, want: errUnixNoProxy},
		{name: "unix trusted not strict", server: `{"listen":["unix/%s/c.sock"],"trusted_proxies_unix":true}`, want: errLeftmostForwarded},
		{name: "unix trusted strict", server: `{"listen":["unix/%s/c.sock"],"trusted_proxies_unix":true,"trusted_proxies_strict":1}`},
		{name: "unix behind proxy_protocol", server: `{"listen":["unix/%s/c.sock"],"listener_wrappers":[{"wrapper":"proxy_protocol","allow":["127.0.0.1/32"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := provisionedServer(t, tc.server)
			c, err := clientAddressProblem(srv)
			if tc.want == nil && err != nil || tc.want != nil && (err == nil || !strings.Contains(err.Error(), tc.want.Error())) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if c.leftmostUnknown {
				t.Fatal("this Caddy hides trusted_proxies from handlers: the provision check cannot work")
			}
		})
	}
}

// serverProbe is a test handler that keeps the server its Provision sees.
type serverProbe struct{}

// probedServer is the server the last serverProbe was provisioned in.
var probedServer *caddyhttp.Server

func init() { caddy.RegisterModule(serverProbe{}) }

// CaddyModule implements caddy.Module.
func (serverProbe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.hooks_test_server_probe", New: func() caddy.Module { return new(serverProbe) }}
}

// Provision records the server.
func (*serverProbe) Provision(ctx caddy.Context) error {
	probedServer, _ = ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (*serverProbe) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// provisionedServer runs a Caddy with one server from JSON (its listen
// addresses with %s for a temp dir) and returns that server as a
// handler's Provision sees it.
func provisionedServer(t *testing.T, server string) *caddyhttp.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "chkp") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	server = strings.ReplaceAll(server, "%s", dir)
	var s map[string]any
	if err := json.Unmarshal([]byte(server), &s); err != nil {
		t.Fatal(err)
	}
	s["routes"] = []any{map[string]any{"handle": []any{map[string]any{"handler": "hooks_test_server_probe"}}}}
	cfg, _ := json.Marshal(map[string]any{"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"s": s}}}})
	probedServer = nil
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	if probedServer == nil {
		t.Fatal("the probe saw no server")
	}
	return probedServer
}

// TestTemplateHeadersWithoutTokens: no template or transform sees a token
// header, aliases included.
func TestTemplateHeadersWithoutTokens(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.TokenHeaders = []string{"x-openclaw-token"} })
	got := h.router.templateHeaders(http.Header{"Authorization": {"Bearer t"}, "X-Service-Token": {"t"}, "X-Openclaw-Token": {"t"},
		"x-openclaw-token": {"t"}, "X-Github-Event": {"push"}})
	if len(got) != 1 || got["x-github-event"] != "push" {
		t.Fatalf("template headers %v", got)
	}
}

// TestSettleUnreadBody: an answer given before the body is read keeps the
// connection only when the body has already arrived in full.
func TestSettleUnreadBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		closes bool
	}{
		{"no body", func() *http.Request { r, _ := http.NewRequest("POST", "/", nil); return r }, false},
		{"HTTP/2", func() *http.Request {
			r, _ := http.NewRequest("POST", "/", strings.NewReader("x"))
			r.ProtoMajor = 2
			return r
		}, false},
		// httptest's recorder has no read deadline: nothing can be drained
		// safely, so the connection closes
		{"body, no deadline support", func() *http.Request {
			r, _ := http.NewRequest("POST", "/", bytes.NewReader([]byte("{}")))
			r.ProtoMajor, r.ProtoMinor = 1, 1
			return r
		}, true},
	} {
		w := httptest.NewRecorder()
		settleUnreadBody(w, tc.req())
		if got := w.Header().Get("Connection") == "close"; got != tc.closes {
			t.Errorf("%s: closes %v, want %v", tc.name, got, tc.closes)
		}
	}
}

// TestLeftmostRequestCheck: where a Caddy version hides trusted_proxies
// from provision, a request whose address a non-strict trusted proxy
// supplied is refused (500) instead of keying the lockout on it.
func TestLeftmostRequestCheck(t *testing.T) {
	req := func(trusted bool) *http.Request {
		r := httptest.NewRequest("POST", "/hooks/wake", nil)
		vars := map[string]any{caddyhttp.TrustedProxyVarKey: trusted}
		return r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	}
	loose, strict := &caddyhttp.Server{}, &caddyhttp.Server{TrustedProxiesStrict: 1}
	for _, tc := range []struct {
		name    string
		check   clientAddressCheck
		trusted bool
		want    bool
	}{
		{"known at provision", clientAddressCheck{server: loose}, true, false},
		{"unknown, from a trusted proxy", clientAddressCheck{server: loose, leftmostUnknown: true}, true, true},
		{"unknown, direct", clientAddressCheck{server: loose, leftmostUnknown: true}, false, false},
		{"unknown, strict", clientAddressCheck{server: strict, leftmostUnknown: true}, true, false},
		{"no server (dry run)", clientAddressCheck{}, true, false},
	} {
		if got := tc.check.leftmost(req(tc.trusted)); got != tc.want {
			t.Errorf("%s: leftmost = %v, want %v", tc.name, got, tc.want)
		}
	}
	h := newTestHandler(t, nil, nil)
	h.addrs = clientAddressCheck{server: loose, leftmostUnknown: true}
	w := httptest.NewRecorder()
	h.serveHook(w, req(true), "wake")
	if w.Code != 500 || !strings.Contains(w.Body.String(), reasonLeftmostForwarded) {
		t.Fatalf("request through a non-strict trusted proxy: %d %s", w.Code, w.Body)
	}
}

// TestForwardDropsTokenHeaders: a forwarded request never carries a token
// header, token_headers aliases included.
func TestForwardDropsTokenHeaders(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.TokenHeaders = []string{"x-hook-alias"} })
	r := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
	r.Header = http.Header{"X-Hook-Alias": {"t"}, "X-Service-Token": {"t"}, "Authorization": {"Bearer t"},
		"X-Github-Event": {"push"}}
	got, herr := h.forwarder.crossingHeaders(r, "/hooks/github")
	if herr != nil || len(got) != 2 || got.Get("X-Github-Event") != "push" || got.Get("Host") != "example.com" {
		t.Fatalf("forwarded headers %v (%v)", got, herr)
	}
}

// TestQueryHasToken: a query parameter named token, in any case, percent-
// or plus-encoded, is refused (scanTarget, before anything else).
func TestQueryHasToken(t *testing.T) {
	h := &Handler{tokens: new(tokenChecker)}
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"token=abc", true},
		{"TOKEN=abc", true},
		{"Token=", true},
		{"token", true},
		{"a=1&token=abc", true},
		{"a=1&b=2&tOkEn=x&c=3", true},
		{"t%6Fken=abc", true},
		{"t%6fken=abc", true},
		{"%74%6F%6B%65%6E=abc", true},
		{"tok%65n%20=abc", true},
		{"a=1&to%6Ben=x", true},
		{"", false},
		{"tokens=abc", false},
		{"x=token", false},
		{"access_token=abc", false},
		{"tok=abc", false},
		{"a=1&b=token&c=tokenx", false},
		{"t%6Fkens=abc", false},
		{"t%zzoken=abc", false},
		{"&&&", false},
	} {
		if got, _ := h.tokens.scanTarget("/hooks/wake?" + tc.query); got != tc.want {
			t.Errorf("scanTarget(/hooks/wake?%s) refuses: %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestQueryHasTokenNoAlloc(t *testing.T) {
	h := &Handler{tokens: new(tokenChecker)}
	target := "/hooks/wake?a=1&b=2&page=3&sort=desc&filter=none"
	if n := testing.AllocsPerRun(100, func() { h.tokens.scanTarget(target) }); n != 0 {
		t.Fatalf("scanTarget allocates %v times for a plain query", n)
	}
}

func TestPresentedToken(t *testing.T) {
	aliases := []string{headerServiceToken, "X-Openclaw-Token"}
	for _, tc := range []struct {
		name, auth, want string
		service, alias   []string
	}{
		{name: "bearer", auth: "Bearer abc", want: "abc"},
		{name: "bearer lower", auth: "bearer abc", want: "abc"},
		{name: "bearer upper", auth: "BEARER abc", want: "abc"},
		{name: "bearer mixed", auth: "bEaReR abc", want: "abc"},
		{name: "bearer trims", auth: "Bearer    abc  ", want: "abc"},
		{name: "bearer empty", auth: "Bearer ", want: ""},
		{name: "bearer blank falls back", auth: "Bearer    ", service: []string{"svc"}, want: "svc"},
		{name: "no space after scheme", auth: "Bearerabc", want: ""},
		{name: "basic refused", auth: "Basic dXNlcjpwYXNz", want: ""},
		{name: "basic with service token", auth: "Basic dXNlcjpwYXNz", service: []string{"svc"}, want: "svc"},
		{name: "service token", service: []string{"svc"}, want: "svc"},
		{name: "service token trimmed", service: []string{"  svc "}, want: "svc"},
		{name: "bearer wins over service", auth: "Bearer abc", service: []string{"svc"}, want: "abc"},
		{name: "alias", alias: []string{"oc"}, want: "oc"},
		{name: "service token before alias", service: []string{"svc"}, alias: []string{"oc"}, want: "svc"},
		{name: "empty service token falls back to alias", service: []string{" "}, alias: []string{"oc"}, want: "oc"},
		{name: "only the first copy counts", service: []string{"", "svc"}, want: ""},
		{name: "nothing", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			for _, v := range tc.service {
				h.Add("x-service-token", v)
			}
			for _, v := range tc.alias {
				h.Add("x-openclaw-token", v)
			}
			if got := (&tokenChecker{headers: aliases}).presented(h); got != tc.want {
				t.Fatalf("presentedToken = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTokenIndex(t *testing.T) {
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	want := []tokenDigest{sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))}
	for _, tc := range []struct {
		presented string
		index     int
	}{
		{a, 0},
		{b, 1},
		{"", -1},
		{a[:31], -1},
		{a + "0", -1},
		{strings.ToUpper(b), -1},
		{"1123456789abcdef0123456789abcdef", -1},
	} {
		if got := (&tokenChecker{digests: want}).index(tc.presented); got != tc.index {
			t.Errorf("tokenIndex(%q) = %d, want %d", tc.presented, got, tc.index)
		}
	}
	empty := []tokenDigest{sha256.Sum256(nil)}
	if (&tokenChecker{digests: empty}).index("") != -1 {
		t.Error("an empty presented token matched the digest of the empty string")
	}
}

func TestIsJSONContentType(t *testing.T) {
	for _, tc := range []struct {
		ct   string
		want bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/json;charset=UTF-8", true},
		{"Application/JSON", true},
		{"application/json;", true},
		{"application/vnd.api+json", true},
		{"application/cloudevents+json; charset=utf-8", true},
		{"application/problem+json", true},
		{"", false},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"text/json", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonx", false},
		{"text/vnd.x+json", false},
		{"application/json; charset", false},
		{"application/", false},
		{"application/json/x", false},
		{"json", false},
	} {
		if got := isJSONContentType(tc.ct); got != tc.want {
			t.Errorf("isJSONContentType(%q) = %v, want %v", tc.ct, got, tc.want)
		}
	}
}

// failingReader fails the test if the body is read at all.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("body was read although Content-Length is over the limit")
	return 0, io.EOF
}

func TestReadBody(t *testing.T) {
	const limit = 10
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		body    io.Reader // nil: http.NoBody
		length  int64     // Content-Length; -1 = chunked/unknown
		bufCap  int
		want    string
		wantErr error
	}{
		{name: "declared over limit", body: strings.NewReader("01234567890"), length: 11, wantErr: errBodyTooLarge},
		{name: "declared exactly limit", body: strings.NewReader("0123456789"), length: 10, want: "0123456789"},
		{name: "chunked over limit", body: strings.NewReader("01234567890"), length: -1, wantErr: errBodyTooLarge},
		{name: "chunked far over limit", body: strings.NewReader(strings.Repeat("x", 1<<20)), length: -1, wantErr: errBodyTooLarge},
		{name: "chunked exactly limit", body: strings.NewReader("0123456789"), length: -1, want: "0123456789"},
		{name: "chunked one byte at a time", body: iotest.OneByteReader(strings.NewReader("0123456789")), length: -1, want: "0123456789"},
		{name: "chunked over limit one byte at a time", body: iotest.OneByteReader(strings.NewReader("0123456789A")), length: -1, wantErr: errBodyTooLarge},
		{name: "understated length", body: strings.NewReader("0123456789ABC"), length: 3, wantErr: errBodyTooLarge},
		{name: "empty", body: strings.NewReader(""), length: 0, want: ""},
		{name: "no body", length: 0, want: ""},
		{name: "zero-capacity buffer grows", body: strings.NewReader("0123456789"), length: -1, bufCap: -1, want: "0123456789"},
		{name: "read error", body: io.MultiReader(strings.NewReader("01"), iotest.ErrReader(errBoom)), length: -1, wantErr: errBoom},
		{name: "data with EOF", body: iotest.DataErrReader(strings.NewReader("0123")), length: -1, want: "0123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/hooks/wake", nil)
			r.Body = http.NoBody
			if tc.body != nil {
				r.Body = io.NopCloser(tc.body)
			}
			if tc.length > limit {
				r.Body = io.NopCloser(failingReader{t})
			}
			r.ContentLength = tc.length
			var buf []byte
			switch {
			case tc.bufCap > 0:
				buf = make([]byte, 0, tc.bufCap)
			case tc.bufCap == 0:
				buf = make([]byte, 0, 4)
			}
			got, err := readBody(r, limit, buf)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, errBodyTooLarge) && tc.length <= limit && len(got) <= limit {
				t.Fatalf("oversize body cut to %d bytes", len(got))
			}
			if err == nil && string(got) != tc.want {
				t.Fatalf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadBodyLarge reads a body much larger than the pooled buffer.
func TestReadBodyLarge(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	for _, limit := range []int64{int64(len(data)), int64(len(data)) - 1} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/wake", io.NopCloser(iotest.HalfReader(bytes.NewReader(data))))
		r.ContentLength = -1
		got, err := readBody(r, limit, make([]byte, 0, 4<<10))
		if limit == int64(len(data)) {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("limit %d: err=%v, %d bytes, equal=%v", limit, err, len(got), bytes.Equal(got, data))
			}
			continue
		}
		if !errors.Is(err, errBodyTooLarge) {
			t.Fatalf("limit %d: err = %v, want errBodyTooLarge", limit, err)
		}
	}
}
