package caddyhook

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestForwardedHop (issue 20 item 7): the key of a request whose client IP
// headers hold an entry that is not an address, between the address Caddy
// chose (given here as Caddy's strict mode computes it, trusting 10/8 and
// 127/8) and the peer, is the hop that wrote that entry; any other request
// keeps Caddy's address.
func TestForwardedHop(t *testing.T) {
	xff := []string{"X-Forwarded-For"}
	for _, c := range []struct {
		name    string
		peer    string   // RemoteAddr
		headers []string // client IP header names (default X-Forwarded-For)
		values  []string // "Name: value" header lines
		chosen  string   // Caddy's client address ("" = none)
		hop     string   // the key; "" = invalid
		skipped bool
	}{
		{name: "client written entry left of a bad one", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 203.0.113.9, unknown"},
			chosen: "203.0.113.9", hop: "127.0.0.1", skipped: true},
		{name: "the hop that wrote it", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 203.0.113.9, unknown, 10.0.0.5"},
			chosen: "203.0.113.9", hop: "10.0.0.5", skipped: true},
		{name: "only a bad entry (Caddy falls back to the peer)", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: unknown"},
			chosen: "127.0.0.1", hop: "127.0.0.1", skipped: true},
		{name: "an empty entry", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 203.0.113.9, , 10.0.0.5"},
			chosen: "203.0.113.9", hop: "10.0.0.5", skipped: true},
		{name: "a bad entry on a header line of its own", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 203.0.113.9", "X-Forwarded-For: obfuscated"},
			chosen: "203.0.113.9", hop: "127.0.0.1", skipped: true},
		{name: "bad entries left of the client are the client's", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: junk, 198.51.100.7, 10.0.0.5"},
			chosen: "198.51.100.7", hop: "198.51.100.7"},
		{name: "well formed", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 198.51.100.7"},
			chosen: "198.51.100.7", hop: "198.51.100.7"},
		{name: "ports and brackets", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: [2001:db8::1]:443, 10.0.0.5:80"},
			chosen: "2001:db8::1", hop: "2001:db8::1"},
		{name: "a zone", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: fe80::1%eth0"},
			chosen: "fe80::1", hop: "fe80::1"},
		{name: "no header: the peer", peer: "127.0.0.1:4000", chosen: "127.0.0.1", hop: "127.0.0.1"},
		{name: "only trusted entries: the peer", peer: "127.0.0.1:4000", values: []string{"X-Forwarded-For: 10.0.0.5, 127.0.0.9"},
			chosen: "127.0.0.1", hop: "127.0.0.1"},
		{name: "an absent first header is no bad entry", peer: "127.0.0.1:4000", headers: []string{"X-Real-Ip", "X-Forwarded-For"},
			values: []string{"X-Forwarded-For: 198.51.100.7"}, chosen: "198.51.100.7", hop: "198.51.100.7"},
		{name: "a bad entry in the first header", peer: "127.0.0.1:4000", headers: []string{"X-Real-Ip", "X-Forwarded-For"},
			values: []string{"X-Real-Ip: -", "X-Forwarded-For: 198.51.100.7"}, chosen: "198.51.100.7", hop: "127.0.0.1", skipped: true},
		{name: "a Unix socket peer wrote it", peer: "@", values: []string{"X-Forwarded-For: 203.0.113.9, unknown"},
			chosen: "203.0.113.9", hop: "", skipped: true},
		{name: "a Unix socket, well formed", peer: "@", values: []string{"X-Forwarded-For: 203.0.113.9"},
			chosen: "203.0.113.9", hop: "203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/hooks/wake", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.values {
				k, val, _ := strings.Cut(v, ":")
				r.Header.Add(k, strings.TrimSpace(val))
			}
			headers := c.headers
			if headers == nil {
				headers = xff
			}
			var chosen netip.Addr
			if c.chosen != "" {
				chosen = netip.MustParseAddr(c.chosen)
			}
			hop, skipped := forwardedHop(r, headers, chosen)
			want := "invalid IP"
			if c.hop != "" {
				want = c.hop
			}
			if hop.String() != want || skipped != c.skipped {
				t.Fatalf("forwardedHop = %s, %v; want %s, %v", hop, skipped, want, c.skipped)
			}
		})
	}
}

// caddyForwardedAddr is how Caddy's strict mode parses one entry
// (modules/caddyhttp/server.go, strictUntrustedClientIp).
func caddyForwardedAddr(part string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(part)
	if err != nil {
		host = part
	}
	host, _, _ = strings.Cut(strings.TrimSpace(host), "%")
	a, err := netip.ParseAddr(host)
	return a, err == nil
}

// FuzzForwardedAddr: forwardedAddr (which avoids SplitHostPort's error
// allocation for the common bare address) reads every entry as Caddy
// does, so the walk stops where Caddy's did.
func FuzzForwardedAddr(f *testing.F) {
	for _, s := range []string{"203.0.113.9", " 203.0.113.9:80", "[2001:db8::1]:443", "2001:db8::1", "fe80::1%eth0",
		"[fe80::1%eth0]:80", "unknown", "", " ", "::ffff:1.2.3.4", "1.2.3.4:", ":80", "[::1]", "1.2.3.4%x:5", "_hidden"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, part string) {
		got, gok := forwardedAddr(part)
		want, wok := caddyForwardedAddr(part)
		if gok != wok || got != want {
			t.Fatalf("forwardedAddr(%q) = %v %v, Caddy reads %v %v", part, got, gok, want, wok)
		}
	})
}

// TestCoversAll: an allow list covers a family when its prefixes together
// contain every address of it.
func TestCoversAll(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")
	for _, c := range []struct {
		allow  string
		v4, v6 bool
	}{
		{"0.0.0.0/0", true, false},
		{"::/0", false, true},
		{"0.0.0.0/0 ::/0", true, true},
		{"0.0.0.0/1 128.0.0.0/1", true, false},
		{"0.0.0.0/2 64.0.0.0/2 128.0.0.0/2 192.0.0.0/2 10.0.0.0/8", true, false},
		{"0.0.0.0/2 64.0.0.0/2 128.0.0.0/2 192.0.0.0/3", false, false},
		{"::/1 8000::/1", false, true},
		{"10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 fd00::/8", false, false},
		{"0.0.0.0/1", false, false},
		{"::ffff:0.0.0.0/96", false, false},
		{"", false, false},
	} {
		var set []netip.Prefix
		for _, s := range strings.Fields(c.allow) {
			set = append(set, netip.MustParsePrefix(s).Masked())
		}
		if got := coversAll(set, v4); got != c.v4 {
			t.Errorf("%q covers IPv4: %v, want %v", c.allow, got, c.v4)
		}
		if got := coversAll(set, v6); got != c.v6 {
			t.Errorf("%q covers IPv6: %v, want %v", c.allow, got, c.v6)
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
