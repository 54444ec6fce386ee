package caddyhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestGatewayOutcomeSanitised (issue 17 item 13): the gateway's 4xx text
// is passed on sanitised and capped; one with nothing left is a 502.
func TestGatewayOutcomeSanitised(t *testing.T) {
	body := func(msg string) []byte { b, _ := json.Marshal(map[string]any{"ok": false, "error": msg}); return b }
	for _, tc := range []struct {
		msg    string
		status int
		reason string
	}{
		{"sessionKey is invalid", 400, "gateway: sessionKey is invalid"},
		{"forged\n{\"level\":\"error\"}", 400, `gateway: forged {"level":"error"}`},
		{strings.Repeat("x", 5000), 400, "gateway: " + strings.Repeat("x", 200) + "…"},
		{"\r\n", 502, "gateway error (status 400)"},
	} {
		herr := answer(gatewayReply{status: 400, body: body(tc.msg)}, nil, false)
		if herr == nil || herr.status != tc.status || herr.reason != tc.reason {
			t.Errorf("outcome(%q) = %+v, want %d %q", tc.msg, herr, tc.status, tc.reason)
		}
	}
}

// TestGatewayRefusalNamesNoOption (issue 25 item 2): when the gateway
// refuses the edge itself (its credentials, forwarded headers it does not
// trust, its own lockout), the sender gets a bare 502 that names nothing
// of the edge's configuration, in either mode, and the operator gets the
// status and a hint in the log.
func TestGatewayRefusalNamesNoOption(t *testing.T) {
	for _, mode := range []string{modeRender, modeForward} {
		t.Run(mode, func(t *testing.T) {
			in := startIngress(t, ingressOpts{hooks: "mode " + mode})
			for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusTooManyRequests} {
				in.gw.FailWith(func(string) int { return status })
				r := in.post("/hooks/agent", `{"message":"m"}`)
				if r.status != http.StatusBadGateway || r.body != `{"ok":false,"error":"gateway unavailable"}` {
					t.Errorf("gateway %d: %d %s, want 502 gateway unavailable", status, r.status, r.body)
				}
			}
			in.gw.FailWith(nil)
			lines := in.logLines("gateway dispatch failed")
			if len(lines) != 4 {
				t.Fatalf("%d dispatch failure lines, want 4: %v", len(lines), lines)
			}
			for _, l := range lines {
				if hint, _ := l["hint"].(string); !strings.Contains(hint, "gateway_token") {
					t.Errorf("log line without the operator's hint: %v", l)
				}
			}
		})
	}
}
