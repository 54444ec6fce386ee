package caddyhook

import (
	"fmt"
	"io"
	"net/http"
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
