package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// TestConsoleProxy: the relay passes the console's requests to the admin
// API's /hooks/ routes with the admin client's Origin and without the
// browser's, and refuses another host (DNS rebinding), other paths and a
// state-changing request from another origin.
func TestConsoleProxy(t *testing.T) {
	var got *http.Request
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		io.WriteString(w, "admin:"+r.Method+" "+r.URL.Path)
	}))
	t.Cleanup(admin.Close)
	ac, err := adminapi.NewClient(strings.TrimPrefix(admin.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	const host, prefix = "127.0.0.1:9999", "/s3cr3t"
	p := newConsoleProxy(ac, prefix, host)
	do := func(method, path, reqHost string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Host = reqHost
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		return w
	}
	w := do(http.MethodGet, prefix+"/hooks/events", host, "Origin", "http://evil.example", "Cookie", "c=1")
	if w.Code != 200 || w.Body.String() != "admin:GET /hooks/events" || got.Header.Get("Origin") != ac.Origin() || got.Header.Get("Cookie") != "" {
		t.Fatalf("relayed GET: %d %q, admin saw %v", w.Code, w.Body, got.Header)
	}
	got = nil
	w = do(http.MethodPost, prefix+"/hooks/spool/pause", host, "Origin", "http://"+host, "Sec-Fetch-Site", "same-origin")
	if w.Code != 200 || got == nil || got.Method != http.MethodPost {
		t.Fatalf("same-origin POST: %d %q", w.Code, w.Body)
	}
	for _, tc := range []struct {
		name, method, path, host string
		hdr                      []string
		status                   int
	}{
		{"another host", http.MethodGet, prefix + "/hooks/", "attacker.example:9999", nil, http.StatusForbidden},
		{"outside the prefix", http.MethodGet, "/hooks/", host, nil, http.StatusNotFound},
		{"not an admin route", http.MethodGet, prefix + "/config/", host, nil, http.StatusNotFound},
		{"cross-origin POST", http.MethodPost, prefix + "/hooks/spool/pause", host, []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"POST without Origin", http.MethodPost, prefix + "/hooks/spool/pause", host, nil, http.StatusForbidden},
		{"cross-site POST", http.MethodPost, prefix + "/hooks/spool/pause", host, []string{"Origin", "http://" + host, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	} {
		got = nil
		if w := do(tc.method, tc.path, tc.host, tc.hdr...); w.Code != tc.status || got != nil {
			t.Errorf("%s: %d (admin reached: %v), want %d", tc.name, w.Code, got != nil, tc.status)
		}
	}
	if w := do(http.MethodGet, prefix+"/", host); w.Code != http.StatusFound || w.Header().Get("Location") != prefix+"/hooks/console/" {
		t.Errorf("the prefix: %d %q", w.Code, w.Header().Get("Location"))
	}
}

// TestConsoleListener: the relay listens on loopback only.
func TestConsoleListener(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if ln, err := consoleListener(addr); err == nil {
			ln.Close()
			t.Errorf("--listen %s accepted", addr)
		}
	}
	ln, err := consoleListener("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}
