package caddyhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIntegrationForwardedUnparseable (issue 20 item 7): in strict mode an
// X-Forwarded-For entry that is not an address, written by a trusted hop
// (a proxy that writes "unknown", say), keys the request on that hop, never
// on an entry the client wrote to its left; it is logged. A client can
// then neither dodge its lock by rotating what it writes nor lock out the
// address it writes. Before: Caddy skips the entry, so the client-written
// one became the key (25 failures with rotating entries, no 429; 20
// naming a victim locked the victim).
func TestIntegrationForwardedUnparseable(t *testing.T) {
	in := startIngress(t, ingressOpts{global: trustLoopback})
	bad := "Authorization: Bearer " + strings.Repeat("f", 40)
	// the trusted hop 127.0.0.5 wrote "unknown" for its client; the client
	// wrote what it likes to the left
	for i := range 25 {
		r := in.do("POST", "/hooks/wake", `{"text":"x"}`, bad, fmt.Sprintf("X-Forwarded-For: 203.0.113.%d, unknown, 127.0.0.5", i))
		if want := 401; i >= 20 && r.status != 429 || i < 20 && r.status != want {
			t.Fatalf("rotating client-written entries, request %d: %d, want 401 then 429 from the 21st (keyed on the hop)", i+1, r.status)
		}
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 203.0.113.3"); r.status != 200 {
		t.Fatalf("an address the attacker wrote: %d %s, want 200 (not counted)", r.status, r.body)
	}
	// the rightmost entry unparseable (the peer wrote it): keyed on the
	// peer; the victim written to its left stays unlocked
	for i := range 20 {
		if r := in.do("POST", "/hooks/wake", `{"text":"x"}`, bad, "X-Forwarded-For: 198.51.100.20, not-an-address"); r.status != 401 {
			t.Fatalf("naming a victim, failure %d: %d, want 401", i+1, r.status)
		}
	}
	if r := in.post("/hooks/wake", `{"text":"victim"}`, "X-Forwarded-For: 198.51.100.20"); r.status != 200 {
		t.Fatalf("the victim the attacker named: %d %s, want 200", r.status, r.body)
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 198.51.100.21, :bad:"); r.status != 429 {
		t.Fatalf("another unparseable entry from the same peer: %d, want 429 (the peer's key is locked)", r.status)
	}
	// a well-formed chain is keyed as before
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 198.51.100.22, 127.0.0.5"); r.status != 200 {
		t.Fatalf("a well-formed chain through the locked hop: %d %s, want 200", r.status, r.body)
	}
	var logs string
	for deadline := time.Now().Add(answerWithin); ; {
		if logs = in.logs(); strings.Contains(logs, msgForwardedUnparsed) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs, msgForwardedUnparsed) || !strings.Contains(logs, `"client_ip":"127.0.0.5"`) {
		t.Fatal("no log line for the unparseable X-Forwarded-For entry keyed on the hop")
	}
}

// TestIntegrationProxyProtocolAllowAll (issue 20 item 7): a proxy_protocol
// listener wrapper that takes the address of a PROXY header from every
// peer (an allow list covering all IPv4 or all IPv6 addresses, or the
// fallback policy use/require) lets any client choose its lockout key, and
// is refused like non-strict trusted_proxies; one limited to the proxies'
// networks loads. Before: allow 0.0.0.0/0 loaded.
func TestIntegrationProxyProtocolAllowAll(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	site := "http://" + in.hostPort()
	cf := func(pp string) string {
		return in.siteCaddyfile("servers {\n\t\tlistener_wrappers {\n\t\t\tproxy_protocol {\n\t\t\t\t"+pp+"\n\t\t\t}\n\t\t}\n\t}", site, "")
	}
	for _, pp := range []string{
		"allow 0.0.0.0/0",
		"allow ::/0",
		"allow 10.0.0.0/8 0.0.0.0/1 128.0.0.0/1",
		"allow 0.0.0.0/0\n\t\t\t\tdeny 203.0.113.0/24",
		"fallback_policy use",
		"allow 10.0.0.0/8\n\t\t\t\tfallback_policy require",
	} {
		err := in.loadErr(cf(pp))
		if err == nil || !strings.Contains(err.Error(), "proxy_protocol") {
			t.Fatalf("proxy_protocol { %s }: load error %v, want the refusal naming proxy_protocol", strings.ReplaceAll(pp, "\n\t\t\t\t", "; "), err)
		}
	}
	in.reloadTo(cf("allow 10.0.0.0/8 fd00::/8"), nil)
	if r := in.post("/hooks/wake", `{"text":"behind a limited proxy_protocol"}`); r.status != 200 {
		t.Fatalf("limited proxy_protocol: %d %s", r.status, r.body)
	}
}

// TestIntegrationForwardedAddressStrict (issue 17 item 3): trusting
// proxies without trusted_proxies_strict is refused at load (Caddy would
// take the client-written leftmost X-Forwarded-For entry); with strict,
// a client behind the proxy can neither dodge its lock by writing other
// addresses nor lock out the address it writes. Before: 200 wrong tokens
// with a rotating leftmost entry gave no 429.
func TestIntegrationForwardedAddressStrict(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	site := "http://" + in.hostPort()
	err := in.loadErr(in.siteCaddyfile("servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t}", site, ""))
	if err == nil || !strings.Contains(err.Error(), "trusted_proxies_strict") {
		t.Fatalf("non-strict trusted_proxies: load error %v, want the refusal naming trusted_proxies_strict", err)
	}
	in.reloadTo(in.siteCaddyfile("servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}", site, ""), nil)
	bad := "Authorization: Bearer " + strings.Repeat("s", 40)
	// the proxy (loopback) appends the real client, 198.51.100.7; the
	// client writes what it likes in front
	for i := range 25 {
		r := in.do("POST", "/hooks/wake", `{"text":"x"}`, bad, fmt.Sprintf("X-Forwarded-For: 203.0.113.%d, 198.51.100.99, 198.51.100.7", i))
		if want := 401; i >= 20 {
			if r.status != 429 {
				t.Fatalf("spoofing request %d: %d, want 429 (the real client is locked)", i+1, r.status)
			}
		} else if r.status != want {
			t.Fatalf("spoofing request %d: %d, want %d", i+1, r.status, want)
		}
	}
	if r := in.post("/hooks/wake", `{"text":"victim"}`, "X-Forwarded-For: 198.51.100.99"); r.status != 200 {
		t.Fatalf("the address the attacker wrote: %d %s, want 200 (not locked)", r.status, r.body)
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: 198.51.100.7"); r.status != 429 {
		t.Fatalf("the attacker's real address: %d, want 429", r.status)
	}
}

// TestIntegrationUnixListener (issue 17 item 4): behind a Unix-socket
// listener the client address comes from the proxy's X-Forwarded-For
// (trusted_proxies_unix + strict); without that setting the config is
// refused, and a request that arrives without a forwarded address is
// refused (403) and never counted, so no one shares a lockout key.
// Before: 20 bad requests from one client made a valid one from another
// client 429.
func TestIntegrationUnixListener(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	sock := filepath.Join(in.dir, "in.sock")
	cf := func(global string) string {
		return in.siteCaddyfile(global, "http://", "")
	}
	bind := func(s string) string { // the site listens on the socket only
		return strings.Replace(s, "http:// {\n", "http:// {\n\tbind unix/"+sock+"\n", 1)
	}
	err := in.loadErr(bind(cf("")))
	if err == nil || !strings.Contains(err.Error(), "trusted_proxies_unix") {
		t.Fatalf("Unix listener without trusted_proxies_unix: load error %v, want the refusal", err)
	}
	if err := in.loadErr(bind(cf("servers {\n\t\ttrusted_proxies_unix\n\t}"))); err == nil || !strings.Contains(err.Error(), "trusted_proxies_strict") {
		t.Fatalf("trusted_proxies_unix without strict: load error %v, want the refusal", err)
	}
	viaSocket := func() *http.Transport {
		return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
	}
	in.reloadTo(bind(cf("servers {\n\t\ttrusted_proxies_unix\n\t\ttrusted_proxies_strict\n\t}")),
		func(path string) (string, error) { return fetchFresh(viaSocket(), "http://proxy"+path) })
	client := &http.Client{Timeout: answerWithin, Transport: viaSocket()}
	do := func(token, xff string) (int, string) {
		req, _ := http.NewRequest("POST", "http://proxy/hooks/wake", strings.NewReader(`{"text":"via the socket"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bad := strings.Repeat("u", 40)
	for i := range 25 {
		if st, body := do(bad, ""); st != 403 || !strings.Contains(body, "client address unknown") {
			t.Fatalf("no forwarded address, request %d: %d %s, want 403", i+1, st, body)
		}
	}
	if st, body := do(itHookToken, ""); st != 403 {
		t.Fatalf("valid token without a forwarded address: %d %s, want 403", st, body)
	}
	for i := range 20 {
		if st, _ := do(bad, "203.0.113.5"); st != 401 {
			t.Fatalf("client A failure %d: %d, want 401 (the 403s were not counted)", i+1, st)
		}
	}
	if st, _ := do(itHookToken, "203.0.113.5"); st != 429 {
		t.Fatalf("client A after 20 failures: %d, want 429", st)
	}
	if st, body := do(itHookToken, "203.0.113.6"); st != 200 {
		t.Fatalf("client B through the same socket: %d %s, want 200", st, body)
	}
}
