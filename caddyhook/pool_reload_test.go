package caddyhook

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// startRecordingGateway starts a second gateway (beside in.gw) that
// wants the integration tests' gateway token and records what it
// receives; it stops when the test ends.
func startRecordingGateway(t *testing.T) *testGateway {
	t.Helper()
	return serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
}

// hooksSite is a site block at addr with a hooks handler on gateway
// (a socket path) and extra hooks lines.
func hooksSite(addr, token, gatewaySock, extra string) string {
	return fmt.Sprintf(`%s {
	bind 127.0.0.1
	hooks {
		token %s
		gateway unix/%s
		gateway_token %s
		%s
	}
	respond "next handler" 200
}
`, addr, token, gatewaySock, itGatewayToken, extra)
}

// postHost sends an authenticated POST to the running server with the
// given Host header (to reach one of several sites on one listener).
func (in *ingress) postHost(host, path, body string, hdr ...string) result {
	in.t.Helper()
	return in.doHost(host, http.MethodPost, path, body, append([]string{"Authorization: Bearer " + itHookToken}, hdr...)...)
}

// TestIntegrationReloadSpoolSender is the reload regression of issue 15:
// a reload that Caddy refuses (here because a second hooks handler has a
// too-short token) leaves the running spool delivering through the
// running config's gateway; an accepted reload with another gateway
// switches the delivery to it, queued events included.
func TestIntegrationReloadSpoolSender(t *testing.T) {
	spoolDir := t.TempDir()
	spoolLines := `spool ` + spoolDir + ` {
		retry_initial 20ms
		retry_max 100ms
	}`
	in := startIngress(t, ingressOpts{hooks: spoolLines})
	gw1, gw2 := in.gw, startRecordingGateway(t)
	delivered := func(gw *devgw.Gateway, n int) {
		t.Helper()
		testkit.WaitForState(t, func() string { return fmt.Sprintf("gateway has %d of %d events", gw.Count(""), n) },
			func() bool { return gw.Count("") >= n })
	}
	if r := in.post("/hooks/agent", `{"message":"before the reloads"}`); r.status != 200 {
		t.Fatalf("spooled accept: %d %s", r.status, r.body)
	}
	delivered(gw1, 1)

	// refused: the same spool on gateway 2 (provisioned first: it comes
	// first in the site), then a hooks handler whose token is too short
	refused := in.caddyfile(strings.Replace(hooksSite(testSiteAddress, itHookToken, gw2.sock, spoolLines),
		`	respond "next handler" 200`, `	hooks /more {
		token too-short-token
		gateway unix/`+gw2.sock+`
	}
	respond "next handler" 200`, 1))
	err := in.tryLoad(refused)
	if err == nil || !strings.Contains(err.Error(), "token: too short") {
		t.Fatalf("reload with a too-short token: %v, want it refused", err)
	}
	if r := in.post("/hooks/agent", `{"message":"after the refused reload"}`); r.status != 200 {
		t.Fatalf("spooled accept after the refused reload: %d %s", r.status, r.body)
	}
	delivered(gw1, 2)
	if n := gw2.Count(""); n != 0 {
		t.Fatalf("the refused config's gateway received %d events", n)
	}

	// accepted: gateway 2 takes over, including what was queued while
	// gateway 1 was down
	in.stopGateway()
	if r := in.post("/hooks/agent", `{"message":"queued while gateway 1 is down"}`); r.status != 200 {
		t.Fatalf("spooled accept with gateway 1 down: %d %s", r.status, r.body)
	}
	in.load(in.caddyfile(hooksSite(testSiteAddress, itHookToken, gw2.sock, spoolLines)))
	if r := in.post("/hooks/agent", `{"message":"after the accepted reload"}`); r.status != 200 {
		t.Fatalf("spooled accept after the reload: %d %s", r.status, r.body)
	}
	delivered(gw2.Gateway, 2)
	got := map[string]bool{}
	for _, rec := range gw2.Received() {
		got[rec.Body["message"].(string)] = true
	}
	for _, want := range []string{"queued while gateway 1 is down", "after the accepted reload"} {
		if !containsWrapped(got, want) {
			t.Errorf("gateway 2 did not receive %q: %v", want, got)
		}
	}
	if n := gw1.Count(""); n != 2 {
		t.Fatalf("gateway 1 received %d events, want the 2 sent before the switch", n)
	}
}

// containsWrapped reports whether one of the messages contains text (the
// messages are wrapped in the untrusted-content boundary).
func containsWrapped(messages map[string]bool, text string) bool {
	for m := range messages {
		if strings.Contains(m, text) {
			return true
		}
	}
	return false
}

// TestIntegrationSpoolOneHandlerPerConfig: two hooks handlers of one
// config cannot share a spool directory (the second one's events would go
// to the first one's gateway).
func TestIntegrationSpoolOneHandlerPerConfig(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	spool := "spool " + t.TempDir()
	err := in.tryLoad(in.caddyfile(
		hooksSite(testSiteAddress, itHookToken, in.sock, spool),
		hooksSite("http://localhost:0", itHookToken, in.sock, spool)))
	if err == nil || !strings.Contains(err.Error(), "already used by another hooks handler of this config") {
		t.Fatalf("two handlers on one spool: %v, want refused", err)
	}
	if r := in.post("/hooks/wake", `{"text":"still serving"}`); r.status != 200 {
		t.Fatalf("the running config after the refused one: %d %s", r.status, r.body)
	}
}

// TestIntegrationReloadKeepsState: an idempotent replay after a reload is
// answered from the cache; a reload that changes a lockout setting keeps
// the locked address locked (and the old config's own reload keeps it
// too, see TestIntegrationLockout).
func TestIntegrationReloadKeepsState(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	first := in.post("/hooks/agent", `{"message":"once"}`, "Idempotency-Key: reload-1")

	// the same handler, another response elsewhere in the site
	in.load(strings.Replace(in.currentCaddyfile(t), `respond "next handler" 200`, `respond "reloaded" 200`, 1))
	if r := in.do("GET", "/elsewhere", ""); r.body != "reloaded" {
		t.Fatalf("reload not in effect: %q", r.body)
	}
	if again := in.post("/hooks/agent", `{"message":"once"}`, "Idempotency-Key: reload-1"); again.body != first.body {
		t.Fatalf("replay after a reload: %s, want the first reply %s", again.body, first.body)
	}
	if n := in.gw.Count("agent"); n != 1 {
		t.Fatalf("gateway dispatches = %d, want 1", n)
	}

	// a changed lockout setting: a new table, which takes the lock over
	bad := "Authorization: Bearer " + strings.Repeat("d", 40)
	for range 20 {
		in.do("POST", "/hooks/wake", `{"text":"x"}`, bad)
	}
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 429 {
		t.Fatalf("after 20 failures: %d, want 429", r.status)
	}
	in.load(strings.Replace(in.currentCaddyfile(t), "gateway_token "+itGatewayToken,
		"gateway_token "+itGatewayToken+"\n\t\tauth_failures 30 2m", 1))
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 429 {
		t.Fatalf("after a reload with other lockout settings: %d, want 429 (lock released)", r.status)
	}
}

// TestIntegrationTwoSitesOwnState: two sites on one server, both serving
// /hooks, with different gateways, keep separate idempotency caches (and
// lockout tables): the same Idempotency-Key and body sent to A and then
// to B reach both gateways.
func TestIntegrationTwoSitesOwnState(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	gwB := startRecordingGateway(t)
	in.load(in.caddyfile(
		hooksSite(testSiteAddress, itHookToken, in.sock, ""),
		hooksSite("http://localhost:0", itHookToken, gwB.sock, "")))
	body := `{"message":"deploy 7 finished"}`
	a := in.postHost("127.0.0.1", "/hooks/agent", body, "Idempotency-Key: same-key")
	b := in.postHost("localhost", "/hooks/agent", body, "Idempotency-Key: same-key")
	if a.status != 200 || b.status != 200 {
		t.Fatalf("A: %d %s; B: %d %s", a.status, a.body, b.status, b.body)
	}
	if in.gw.Count("agent") != 1 || gwB.Count("agent") != 1 {
		t.Fatalf("gateway A received %d, gateway B %d; want 1 each", in.gw.Count("agent"), gwB.Count("agent"))
	}
	if a.body == b.body {
		t.Fatalf("site B answered with site A's reply %s", a.body)
	}
	if runID := b.json(t)["runId"]; runID != gwB.Received()[0].RunID {
		t.Fatalf("site B's runId %v is not its gateway's %s", runID, gwB.Received()[0].RunID)
	}

	// lockout: an address locked at A is not locked at B
	bad := "Authorization: Bearer " + strings.Repeat("e", 40)
	for range 20 {
		in.do("POST", "/hooks/wake", `{"text":"x"}`, bad)
	}
	if r := in.postHost("127.0.0.1", "/hooks/wake", `{"text":"x"}`); r.status != 429 {
		t.Fatalf("A after 20 failures: %d, want 429", r.status)
	}
	if r := in.postHost("localhost", "/hooks/wake", `{"text":"x"}`); r.status != 200 {
		t.Fatalf("B after 20 failures at A: %d %s, want 200", r.status, r.body)
	}
}

// TestIntegrationReloadAppliesSpoolSettings (issue 25 item 1): a reload
// that changes the spool's settings applies them to the running spool
// (which outlives the reload): an event waiting for a gateway that is down
// expires under the new, shorter max_age, and the admin API shows the
// settings in force. It used to be accepted and ignored until a restart.
func TestIntegrationReloadAppliesSpoolSettings(t *testing.T) {
	dir := t.TempDir()
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + dir + ` {
			max_age 72h
			retry_initial 20ms
			retry_max 50ms
		}`})
	in.gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
	if r := in.post("/hooks/agent", `{"message":"waits for the gateway"}`); r.status != 200 {
		t.Fatalf("spooled accept: %d %s", r.status, r.body)
	}
	cfg := adm.config()
	editHooks(t, cfg, func(list []any, i int) []any {
		list[i].(map[string]any)["spool"].(map[string]any)["max_age"] = "1s"
		return list
	})
	if status, ans := adm.load(cfg); status != http.StatusOK {
		t.Fatalf("reload: %d %s", status, ans)
	}
	testkit.WaitForState(t, func() string { return fmt.Sprintf("no expired dead letter: %+v", adm.dead("")) }, func() bool {
		dead := adm.dead("")
		return len(dead) == 1 && keepsCause(dead[0].Reason) // expired after its attempts, with the last 503
	})
	if st := adm.status("").Spool; st.MaxAgeSeconds != 1 || st.RetryInitialSeconds != 0.02 || st.RetryMaxSeconds != 0.05 {
		t.Fatalf("settings in force after the reload: %+v", st)
	}
}
