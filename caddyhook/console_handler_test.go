package caddyhook

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"
	"golang.org/x/crypto/bcrypt"
)

// consoleSites are a site with the console behind basic_auth, one
// without authentication, and one with insecure_no_auth.
func consoleSites(t *testing.T, in *ingress) (authed, bare, open string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("op-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	site := func(host, body string) string {
		return fmt.Sprintf("http://%s:0 {\n\tbind %s\n%s\n}\n", host, host, body)
	}
	in.load(in.caddyfile(
		fmt.Sprintf(`%s {
	bind 127.0.0.1
	hooks {
		token %s
		gateway unix/%s
		gateway_token %s
	}
	handle_path /ops/* {
		basic_auth {
			op %s
		}
		hooks_console
	}
	respond "next handler" 200
}
`, testSiteAddress, itHookToken, in.sock, itGatewayToken, hash),
		site("127.0.0.2", "\thooks_console"),
		site("127.0.0.3", "\thooks_console {\n\t\tinsecure_no_auth\n\t}"),
	))
	addrs := listenAddrs(t)
	for _, a := range addrs {
		switch {
		case strings.HasPrefix(a[0], "127.0.0.1:"):
			authed = "http://" + a[0]
		case strings.HasPrefix(a[0], "127.0.0.2:"):
			bare = "http://" + a[0]
		case strings.HasPrefix(a[0], "127.0.0.3:"):
			open = "http://" + a[0]
		}
	}
	if authed == "" || bare == "" || open == "" {
		t.Skipf("this machine's loopback lacks 127.0.0.2 or .3: %v", addrs)
	}
	return authed, bare, open
}

// consoleReq sends a console request and returns status, headers and body.
func consoleReq(t *testing.T, method, u string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader("{}"))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestConsoleHandlerAuthAndCSRF: the hooks_console handler answers 403
// to a request no authentication handler let in (unless
// insecure_no_auth); the page carries a strict CSP and a same-origin
// token, which every state-changing API request must carry, from the same
// origin.
func TestConsoleHandlerAuthAndCSRF(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	authed, bare, open := consoleSites(t, in)
	basic := func(extra ...string) []string {
		return append([]string{"Authorization", "Basic b3A6b3AtcGFzc3dvcmQ="}, extra...) // op:op-password
	}
	if st, _, body := consoleReq(t, "GET", bare+"/"); st != http.StatusForbidden || !strings.Contains(body, "basic_auth") {
		t.Fatalf("console without authentication: %d %s", st, body)
	}
	if st, _, _ := consoleReq(t, "GET", bare+"/api/events"); st != http.StatusForbidden {
		t.Fatalf("console API without authentication: %d", st)
	}
	if st, _, _ := consoleReq(t, "GET", authed+"/ops/"); st != http.StatusUnauthorized {
		t.Fatalf("basic_auth let an anonymous request through: %d", st)
	}
	if st, _, _ := consoleReq(t, "GET", open+"/"); st != http.StatusOK {
		t.Fatalf("insecure_no_auth: %d", st)
	}
	st, hd, page := consoleReq(t, "GET", authed+"/ops/", basic()...)
	if st != http.StatusOK || !strings.Contains(hd.Get("Content-Security-Policy"), "default-src 'self'") ||
		hd.Get("X-Content-Type-Options") != "nosniff" || strings.Contains(page, "<script>") {
		t.Fatalf("page: %d %v", st, hd)
	}
	m := regexp.MustCompile(`name="hooks-csrf" content="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	token := m[1]
	for asset, ct := range consoleAssets {
		if st, hd, _ := consoleReq(t, "GET", authed+"/ops/"+asset, basic()...); st != 200 || hd.Get("Content-Type") != ct {
			t.Errorf("%s: %d %s", asset, st, hd.Get("Content-Type"))
		}
	}
	if st, _, _ := consoleReq(t, "GET", authed+"/ops/api/events", basic()...); st != http.StatusOK {
		t.Fatalf("API list: %d", st)
	}
	in.post("/hooks/wake", `{"text":"x"}`)
	lift := authed + "/ops/api/lockouts/203.0.113.9"
	host := strings.TrimPrefix(authed, "http://")
	for _, c := range []struct {
		name string
		hdr  []string
		want int
	}{
		{"no token", basic(), http.StatusForbidden},
		{"wrong token", basic("X-Hooks-Csrf", strings.Repeat("0", 64)), http.StatusForbidden},
		{"cross-site", basic("X-Hooks-Csrf", token, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
		{"other origin", basic("X-Hooks-Csrf", token, "Origin", "http://evil.example"), http.StatusForbidden},
		{"same origin", basic("X-Hooks-Csrf", token, "Origin", "http://"+host, "Sec-Fetch-Site", "same-origin"), http.StatusNotFound},
	} {
		if st, _, body := consoleReq(t, "DELETE", lift, c.hdr...); st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
}

// forwardAuthService is an auth service for forward_auth on 127.0.0.1:0:
// a request with the cookie session=<user> is answered 200 with
// Remote-User: <user>, session=anon 200 without it, anything else 401.
func forwardAuthService(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("session")
		switch {
		case err != nil:
			w.WriteHeader(http.StatusUnauthorized)
		case c.Value == "anon":
			w.WriteHeader(http.StatusOK)
		default:
			w.Header().Set("Remote-User", c.Value)
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestConsoleBehindForwardAuth (issue 34 B9): behind forward_auth, which
// sets no {http.auth.user.id}, the console takes its user from the header
// named by user_header in forward_auth's answer (copy_headers). The user
// the auth service names is let in, with a CSRF token of its own; an
// answer without the header, a request that did not pass forward_auth,
// and a client's own Remote-User header are refused. Before: the console
// always answered 403 behind forward_auth, as the docs suggested it, and
// user_header did not exist.
func TestConsoleBehindForwardAuth(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	auth := forwardAuthService(t)
	console := func(path, opts string) string {
		return fmt.Sprintf("\thandle_path %s {\n\t\tforward_auth %s {\n\t\t\turi /auth\n\t\t\tcopy_headers Remote-User\n\t\t}\n\t\thooks_console %s\n\t}\n", path, auth, opts)
	}
	site := hooksSite(testSiteAddress, itHookToken, in.sock, "")
	routes := console("/ops/*", "{\n\t\t\tuser_header Remote-User\n\t\t}") + console("/plain/*", "") +
		"\thandle_path /direct/* {\n\t\thooks_console {\n\t\t\tuser_header Remote-User\n\t\t}\n\t}\n"
	in.load(in.caddyfile(strings.Replace(site, "\trespond \"next handler\" 200", routes+"\trespond \"next handler\" 200", 1)))
	csrf := regexp.MustCompile(`name="hooks-csrf" content="([0-9a-f]{64})"`)
	page := func(path string, hdr ...string) (int, string) {
		st, _, body := consoleReq(t, "GET", in.base+path, hdr...)
		if m := csrf.FindStringSubmatch(body); m != nil {
			return st, m[1]
		}
		return st, body
	}
	for _, c := range []struct {
		name, path string
		hdr        []string
		want       int
	}{
		{"no session", "/ops/", nil, http.StatusUnauthorized},
		{"a user without user_header", "/plain/", []string{"Cookie", "session=alice"}, http.StatusForbidden},
		{"an answer without Remote-User", "/ops/", []string{"Cookie", "session=anon"}, http.StatusForbidden},
		{"an answer without Remote-User, the client's own", "/ops/", []string{"Cookie", "session=anon", "Remote-User", "alice"}, http.StatusForbidden},
		{"no forward_auth, the client's own", "/direct/", []string{"Remote-User", "alice"}, http.StatusForbidden},
		{"alice", "/ops/", []string{"Cookie", "session=alice"}, http.StatusOK},
	} {
		if st, body := page(c.path, c.hdr...); st != c.want {
			t.Errorf("%s: %d %.200s, want %d", c.name, st, body, c.want)
		}
	}
	_, alice := page("/ops/", "Cookie", "session=alice")
	_, forged := page("/ops/", "Cookie", "session=alice", "Remote-User", "bob")
	_, bob := page("/ops/", "Cookie", "session=bob")
	if alice != forged || alice == bob || len(alice) != 64 {
		t.Fatalf("CSRF tokens: alice %q, alice sending Remote-User: bob %q, bob %q; want alice's twice and bob's apart", alice, forged, bob)
	}
	host := strings.TrimPrefix(in.base, "http://")
	lift := "/ops/api/lockouts/203.0.113.9"
	for _, c := range []struct {
		name  string
		token string
		want  int
	}{
		{"alice's token", alice, http.StatusNotFound}, // no such lockout: the request got through
		{"bob's token", bob, http.StatusForbidden},
	} {
		if st, _, body := consoleReq(t, "DELETE", in.base+lift, "Cookie", "session=alice", "X-Hooks-Csrf", c.token,
			"Origin", "http://"+host, "Sec-Fetch-Site", "same-origin"); st != c.want {
			t.Errorf("alice's DELETE with %s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
}

// TestConsoleScriptParses: the console's script is valid JavaScript
// (parsed by esbuild), so that a broken script (a merge that lost a
// brace) fails in -short runs too, not only in the browser tests.
func TestConsoleScriptParses(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("console", "console.js"))
	if err != nil {
		t.Fatal(err)
	}
	res := api.Transform(string(src), api.TransformOptions{Loader: api.LoaderJS, Sourcefile: "console.js", Target: api.ES2022})
	for _, m := range res.Errors {
		line := 0
		if m.Location != nil {
			line = m.Location.Line
		}
		t.Errorf("console.js:%d: %s", line, m.Text)
	}
}
