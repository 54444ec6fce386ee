package caddyhook

import (
	"fmt"
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
