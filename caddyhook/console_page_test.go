package caddyhook

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestAdminConsolePage: the admin endpoint serves the console at
// /hooks/console/ (redirecting /hooks/console there), with the same
// headers, its API one level up and no token (the admin endpoint's origin
// checks guard it).
func TestAdminConsolePage(t *testing.T) {
	_, adm := startOpsIngress(t, ingressOpts{})
	req, _ := http.NewRequest("GET", "http://127.0.0.1/hooks/console", nil)
	c := &http.Client{Transport: adm.c.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/hooks/console/" {
		t.Fatalf("/hooks/console: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	st, page := adm.do("GET", "/hooks/console/", "")
	if st != 200 || !strings.Contains(page, `name="hooks-api" content="../"`) || !strings.Contains(page, `name="hooks-csrf" content=""`) {
		t.Fatalf("admin console page: %d\n%s", st, page)
	}
	if st, js := adm.do("GET", "/hooks/console/console.js", ""); st != 200 || strings.Contains(js, "innerHTML") {
		t.Fatalf("console.js: %d (innerHTML present: %v)", st, strings.Contains(js, "innerHTML"))
	}
	if st, _ := adm.do("POST", "/hooks/console/", "{}"); st != http.StatusMethodNotAllowed {
		t.Fatalf("POST to the page: %d", st)
	}
}

// TestConsoleRedirectStaysOnTheSite (issue 34 B8): the page asked for without
// its trailing slash is redirected to a path on the same site, however
// the path starts: a console mounted at the site root asked for as
// //evil.example was redirected to //evil.example/, which a browser reads
// as the host evil.example (an open redirect).
func TestConsoleRedirectStaysOnTheSite(t *testing.T) {
	for _, c := range []struct{ target, want string }{
		{"/ops", "/ops/"},
		{"/ops?x=1", "/ops/?x=1"},
		{"//evil.example", "/evil.example/"},
		{"///evil.example", "/evil.example/"},
		{"//evil.example?x=1", "/evil.example/?x=1"},
		{"/%2F%2Fevil.example", "/evil.example/"},
		{"//evil.example/path", "/evil.example/path/"},
		{"//evil.example/ops", "/evil.example/ops/"},
		{"/\\evil.example", "/%5Cevil.example/"},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://site.example"+c.target, nil)
		r.URL.RawPath = "" // as the server reads the target
		w := httptest.NewRecorder()
		if err := serveConsole(w, r, consoleMount{api: "api/"}, ""); err != nil {
			t.Fatalf("%s: %v", c.target, err)
		}
		loc := w.Header().Get("Location")
		if w.Code != http.StatusFound || loc != c.want {
			t.Errorf("%s: %d Location %q, want 302 %q", c.target, w.Code, loc, c.want)
		}
		base, _ := url.Parse("http://site.example" + c.target)
		if to, err := base.Parse(loc); err != nil || to.Host != "site.example" {
			t.Errorf("%s: Location %q leads to %v (%v), want a path on site.example", c.target, loc, to, err)
		}
	}
}
