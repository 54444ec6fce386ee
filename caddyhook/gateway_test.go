package caddyhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// logLines returns the JSON log lines whose msg starts with msg.
func (in *ingress) logLines(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(in.logs(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}

// TestGatewayProblemsAreLogged: a missing gateway socket is a warning at
// start, and each failed dispatch a warning naming the gateway and the OS
// error, never a token or the payload.
func TestGatewayProblemsAreLogged(t *testing.T) {
	in := startIngress(t, ingressOpts{noGW: true})
	start := in.logLines("gateway not reachable at start")
	if len(start) != 1 || start[0]["level"] != "warn" || start[0]["gateway"] != "unix/"+in.sock ||
		!strings.Contains(start[0]["error"].(string), "no such file or directory") {
		t.Fatalf("start-up warning %v", start)
	}
	const payload = "payload-canary-0c41"
	if r := in.post("/hooks/wake", `{"text":"`+payload+`"}`); r.status != http.StatusBadGateway {
		t.Fatalf("wake with the gateway down: %d", r.status)
	}
	var fails []map[string]any
	testkit.WaitForState(t, func() string { return "no dispatch failure logged" }, func() bool {
		fails = in.logLines("gateway dispatch failed")
		return len(fails) > 0
	})
	f := fails[0]
	if f["level"] != "warn" || f["gateway"] != "unix/"+in.sock || f["kind"] != "wake" || f["event_id"] == "" ||
		!strings.Contains(f["error"].(string), "connect: no such file or directory") {
		t.Fatalf("dispatch failure line %v", f)
	}
	// the gateway answers 503: logged with the status
	in.startGateway()
	in.gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
	if r := in.post("/hooks/agent", `{"message":"`+payload+`"}`); r.status != http.StatusServiceUnavailable {
		t.Fatalf("agent with the gateway answering 503: %d (the gateway's 503 passes through)", r.status)
	}
	fails = in.logLines("gateway dispatch failed")
	if len(fails) != 2 || fails[1]["status"] != float64(503) || fails[1]["kind"] != "agent" {
		t.Fatalf("dispatch failure lines %v", fails)
	}
	// the gateway refuses caddyhook's gateway_token: logged; a validation
	// refusal (the sender's business) is not
	for _, status := range []int{http.StatusUnauthorized, http.StatusBadRequest} {
		in.gw.FailWith(func(string) int { return status })
		in.post("/hooks/wake", `{"text":"`+payload+`"}`)
	}
	fails = in.logLines("gateway dispatch failed")
	if len(fails) != 3 || fails[2]["status"] != float64(401) {
		t.Fatalf("dispatch failure lines %v", fails)
	}
	for _, secret := range []string{itHookToken, itGatewayToken, payload} {
		if strings.Contains(in.logs(), secret) {
			t.Fatalf("the log carries %q", secret)
		}
	}
}

// TestGatewayReachableNoWarning: a listening gateway gives no warning.
func TestGatewayReachableNoWarning(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	if w := in.logLines("gateway not reachable"); len(w) != 0 {
		t.Fatalf("warning with the gateway up: %v", w)
	}
}
