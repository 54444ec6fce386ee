package caddyhook

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleHostDNSRebinding (issue 34 B4): an insecure_no_auth console
// on a loopback site without a host matcher, reached by a page on the
// attacker's name that DNS rebinding pointed at the console's address
// (its requests carry Host and Origin evil.example): the page, the
// stored payloads and a replay are refused, while the console answers
// its IP address and localhost, and a site with a name answers that name.
// Before: the attacker's page read the CSRF token and the stored payload
// and replayed the agent run (200, the gateway got it twice).
func TestConsoleHostDNSRebinding(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	in.load(in.caddyfile(
		hooksSite(testSiteAddress, itHookToken, in.sock, "events {\n\t\t\tbodies on\n\t\t}"),
		"http://:0 {\n\tbind 127.0.0.4\n\thooks_console {\n\t\tinsecure_no_auth\n\t}\n}\n",
		"http://console.test:0 {\n\tbind 127.0.0.5\n\thooks_console {\n\t\tinsecure_no_auth\n\t}\n}\n",
	))
	var bare, named string
	for _, a := range listenAddrs(t) {
		switch {
		case strings.HasPrefix(a[0], "127.0.0.4:"):
			bare = a[0]
		case strings.HasPrefix(a[0], "127.0.0.5:"):
			named = a[0]
		case strings.HasPrefix(a[0], "127.0.0.1:"):
			in.base = "http://" + a[0]
		}
	}
	if bare == "" || named == "" {
		t.Skipf("this machine's loopback lacks 127.0.0.4 or .5: %v", listenAddrs(t))
	}
	_, port, _ := strings.Cut(bare, ":")
	evil := "evil.example:" + port
	if r := in.post("/hooks/agent", `{"message":"the stored payload"}`); r.status != 200 {
		t.Fatalf("agent: %d %s", r.status, r.body)
	}
	// as a page on evil.example sees the console
	req := func(method, host, path string, hdr ...string) (int, string) {
		t.Helper()
		return consoleHostReq(t, method, "http://"+bare+path, host, hdr...)
	}
	st, page := req("GET", evil, "/")
	if st != http.StatusForbidden || strings.Contains(page, "hooks-csrf") {
		t.Errorf("the page for Host %s: %d, want 403 without the token\n%.300s", evil, st, page)
	}
	if st, body := req("GET", evil, "/api/events"); st != http.StatusForbidden || strings.Contains(body, "stored payload") {
		t.Errorf("the events for Host %s: %d, want 403\n%.300s", evil, st, body)
	}
	// the token, as the operator's page has it, and the event's id
	st, page = req("GET", "127.0.0.4:"+port, "/")
	m := regexp.MustCompile(`name="hooks-csrf" content="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if st != http.StatusOK || m == nil {
		t.Fatalf("the page for its address: %d\n%.300s", st, page)
	}
	st, body := req("GET", "127.0.0.4:"+port, "/api/events?status=accepted")
	var list struct {
		Entries []struct {
			ID string `json:"id"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &list); st != http.StatusOK || err != nil || len(list.Entries) != 1 {
		t.Fatalf("the events for its address: %d %v\n%.300s", st, err, body)
	}
	sent := len(in.gw.Received())
	st, body = req("POST", evil, "/api/events/"+list.Entries[0].ID+"/replay",
		"X-Hooks-Csrf", m[1], "Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin")
	if st != http.StatusForbidden || len(in.gw.Received()) != sent {
		t.Errorf("a replay from Host %s: %d %s, the gateway got %d more, want 403 and none", evil, st, body, len(in.gw.Received())-sent)
	}
	for _, host := range []string{"127.0.0.4:" + port, "localhost:" + port, "LocalHost.:" + port, "ops.localhost:" + port} {
		if st, _ := req("GET", host, "/"); st != http.StatusOK {
			t.Errorf("the page for Host %s: %d, want 200", host, st)
		}
	}
	// a site with a name: Caddy's host matcher bounds the Host already
	_, nport, _ := strings.Cut(named, ":")
	if st, page := consoleHostReq(t, "GET", "http://"+named+"/", "console.test:"+nport); st != http.StatusOK || !strings.Contains(page, "hooks-csrf") {
		t.Errorf("the named site's page: %d", st)
	}
	if _, page := consoleHostReq(t, "GET", "http://"+named+"/", "evil.example:"+nport); strings.Contains(page, "hooks-csrf") {
		t.Error("the named site's console answered Host evil.example")
	}
}

// consoleHostReq sends a console request with the given Host header.
func consoleHostReq(t *testing.T, method, u, host string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader("{}"))
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLiteralHost: the Host names no DNS answer stands for.
func TestLiteralHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:2020": true, "[::1]:2020": true, "10.0.0.7": true,
		"localhost": true, "LOCALHOST:80": true, "localhost.": true, "a.localhost:1": true,
		"evil.example": false, "evil.example:2020": false, "localhost.evil.example": false, "127.0.0.1.nip.io": false,
		"": false, "xlocalhost": false,
	} {
		if got := literalHost(host); got != want {
			t.Errorf("literalHost(%q) = %v, want %v", host, got, want)
		}
	}
}
