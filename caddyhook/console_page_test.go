package caddyhook

import (
	"net/http"
	"net/http/httptest"
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

// TestConsoleRedirectStaysOnTheSite: the page's redirect to its
// directory keeps one leading slash, so that a path sent as //host/…
// does not send the browser to another host.
func TestConsoleRedirectStaysOnTheSite(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"/ops", "/ops/"},
		{"/ops?x=1", "/ops/?x=1"},
		{"//evil.example/ops", "/evil.example/ops/"},
		{"///evil.example", "/evil.example/"},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://site.example"+tc.target, nil)
		r.URL.Path = strings.SplitN(tc.target, "?", 2)[0] // as sent, not cleaned
		if got := consoleDirURL(r); got != tc.want {
			t.Errorf("%s: redirect to %q, want %q", tc.target, got, tc.want)
		}
	}
}
