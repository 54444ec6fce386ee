package caddyhook

import (
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
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
