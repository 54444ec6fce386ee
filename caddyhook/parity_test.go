package caddyhook

import (
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// gatewayPolicy mirrors the hooks config the parity cases were checked
// against on the pinned gateway (openclaw 2026.9.6): agent main only,
// request session keys allowed under hook:, no channel plugins (so the
// channel list is just "last").
var gatewayPolicy = policyConfig{
	Agents: []string{"main"}, AllowedAgentIDs: []string{"main"}, AllowedAgentIDsSet: true,
	AllowRequestSessionKey: true, AllowedSessionKeyPrefixes: []string{"hook:"}, Channels: []string{"last"},
}

// TestRequestParity runs /wake and /agent bodies through the request
// decoding and the policy, with the answers the pinned gateway gives to
// the same bodies (its error texts verbatim, except those naming one of
// its config keys, which name caddyhook's option instead).
func TestRequestParity(t *testing.T) {
	for _, tc := range []struct {
		name, sub, body string
		pc              *policyConfig // nil: gatewayPolicy
		want            string        // "" = accepted
	}{
		// wake routing fields
		{name: "wake", sub: "wake", body: `{"text":"x"}`},
		{name: "wake mode compared exactly", sub: "wake", body: `{"text":"x","mode":" next-heartbeat"}`},
		{name: "wake agentId number", sub: "wake", body: `{"text":"x","agentId":42}`, want: "agentId must be a non-empty string"},
		{name: "wake agentId empty", sub: "wake", body: `{"text":"x","agentId":""}`, want: "agentId must be a non-empty string"},
		{name: "wake agentId null", sub: "wake", body: `{"text":"x","agentId":null}`, want: "agentId must be a non-empty string"},
		{name: "wake agentId unknown", sub: "wake", body: `{"text":"x","agentId":"ghost"}`, want: `unknown agentId "ghost"`},
		{name: "wake agentId unusable", sub: "wake", body: `{"text":"x","agentId":"!!"}`, want: `unknown agentId "!!"`},
		{name: "wake agentId case-folded", sub: "wake", body: `{"text":"x","agentId":"MAIN"}`},
		{name: "wake agentId not allowed", sub: "wake", body: `{"text":"x"}`,
			pc: &policyConfig{AllowedAgentIDsSet: true}, want: "agentId is not allowed by allowed_agent_ids"},
		{name: "wake sessionKey empty", sub: "wake", body: `{"text":"x","sessionKey":""}`, want: "sessionKey must be a non-empty string"},
		{name: "wake sessionKey prefix", sub: "wake", body: `{"text":"x","sessionKey":"other:x"}`, want: "sessionKey must start with one of: hook:"},
		{name: "wake sessionKey needs now", sub: "wake", body: `{"text":"x","sessionKey":"hook:w","mode":"next-heartbeat"}`,
			want: "sessionKey requires mode=now"},
		{name: "wake sessionKey disabled", sub: "wake", body: `{"text":"x","sessionKey":"hook:w"}`, pc: &policyConfig{},
			want: "sessionKey is disabled for externally supplied hook payload values; set allow_request_session_key to enable"},
		{name: "wake sessionKey", sub: "wake", body: `{"text":"x","sessionKey":"hook:w"}`},

		// agent fields
		{name: "waitForCompletion string", sub: "agent", body: `{"message":"m","waitForCompletion":"yes"}`, want: "waitForCompletion must be boolean"},
		{name: "waitForCompletion checked first", sub: "agent", body: `{"waitForCompletion":1}`, want: "waitForCompletion must be boolean"},
		{name: "waitForCompletion", sub: "agent", body: `{"message":"m","waitForCompletion":true}`},
		{name: "sessionMode unknown", sub: "agent", body: `{"message":"m","sessionMode":"forever","deliver":false}`, want: "sessionMode must be isolated or persistent"},
		{name: "sessionMode null", sub: "agent", body: `{"message":"m","sessionMode":null}`, want: "sessionMode must be isolated or persistent"},
		{name: "persistent needs a key", sub: "agent", body: `{"message":"m","sessionMode":"persistent","deliver":false}`,
			want: "sessionKey is required when sessionMode is persistent"},
		{name: "persistent needs prefixes", sub: "agent", body: `{"message":"m","sessionMode":"persistent","sessionKey":"hook:p"}`,
			pc: &policyConfig{AllowRequestSessionKey: true}, want: "allowed_session_key_prefixes is required when direct hook sessionMode is persistent"},
		{name: "persistent", sub: "agent", body: `{"message":"m","sessionMode":"persistent","sessionKey":"hook:p"}`},
		{name: "agentId number", sub: "agent", body: `{"message":"m","agentId":42}`, want: "agentId must be a non-empty string"},
		{name: "agentId empty", sub: "agent", body: `{"message":"m","agentId":""}`, want: "agentId must be a non-empty string"},
		{name: "agentId unknown", sub: "agent", body: `{"message":"m","agentId":"ghost"}`, want: `unknown agentId "ghost"`},
		{name: "agentId unknown without an agent list", sub: "agent", body: `{"message":"m","agentId":"ghost"}`, pc: &policyConfig{}},
		{name: "to empty", sub: "agent", body: `{"message":"m","to":""}`, want: "to must be a non-empty string for hook delivery"},
		{name: "to number", sub: "agent", body: `{"message":"m","to":42}`, want: "to must be a non-empty string for hook delivery"},
		{name: "to null", sub: "agent", body: `{"message":"m","to":null}`, want: "to must be a non-empty string for hook delivery"},
		{name: "to without channel", sub: "agent", body: `{"message":"m","to":"x"}`, want: "channel and to must be set together for hook delivery"},
		{name: "channel without to", sub: "agent", body: `{"message":"m","channel":"last"}`, want: "channel and to must be set together for hook delivery"},
		{name: "channel last with to", sub: "agent", body: `{"message":"m","channel":"last","to":"x"}`,
			want: "channel must name a concrete channel for hook delivery"},
		{name: "channel unknown", sub: "agent", body: `{"message":"m","channel":"sms","to":""}`, want: "channel must be last"},
		{name: "channel only checked when delivering", sub: "agent", body: `{"message":"m","channel":"sms","to":42,"accountId":"","deliver":false}`},
		{name: "accountId without route", sub: "agent", body: `{"message":"m","accountId":"a"}`, want: "accountId requires channel and to for hook delivery"},
		{name: "accountId empty", sub: "agent", body: `{"message":"m","accountId":""}`, want: "accountId must be a non-empty string for hook delivery"},
		{name: "accountId with route", sub: "agent", body: `{"message":"m","channel":"slack","to":"C1","accountId":"work"}`,
			pc: &policyConfig{Channels: []string{"last", "slack"}}},
		{name: "sessionKey number is no key", sub: "agent", body: `{"message":"m","sessionKey":42}`},
		{name: "wakeMode compared exactly", sub: "agent", body: `{"message":"m","wakeMode":" next-heartbeat"}`},
		{name: "model empty", sub: "agent", body: `{"message":"m","model":""}`, want: "model required"},
		{name: "model null", sub: "agent", body: `{"message":"m","model":null}`, want: "model required"},
		{name: "model alias", sub: "agent", body: `{"message":"m","model":"Sonnet"}`,
			pc: &policyConfig{AllowedModels: []string{"anthropic/claude-sonnet-4-5", "sonnet"}}},
		{name: "model with auth profile", sub: "agent", body: `{"message":"m","model":"anthropic/claude-sonnet-4-5@work"}`,
			pc: &policyConfig{AllowedModels: []string{"anthropic/claude-sonnet-4-5"}}},
		{name: "model not allowed", sub: "agent", body: `{"message":"m","model":"openai/gpt-5"}`,
			pc: &policyConfig{AllowedModels: []string{"anthropic/claude-sonnet-4-5"}}, want: "model is not allowed by allowed_models"},
		{name: "agent not allowed", sub: "agent", body: `{"message":"m"}`,
			pc: &policyConfig{AllowedAgentIDs: []string{"ops"}, AllowedAgentIDsSet: true}, want: "agentId is not allowed by allowed_agent_ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := gatewayPolicy
			if tc.pc != nil {
				pc = *tc.pc
			}
			p := mustPolicy(t, pc)
			f := payload(t, tc.body)
			var (
				a   action
				err error
			)
			if tc.sub == "wake" {
				a, err = decodeWake(f)
			} else {
				a, err = p.decodeAgent(f)
			}
			if err == nil {
				a.fromRequest = true
				err = p.Apply(&a)
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParityThroughHandler sends requests the gateway answers in a
// particular way through the render-mode handler: a byte order mark and
// surrounding white space, non-object bodies, an over-long idempotency
// key, and wake routing fields in the gateway body.
func TestParityThroughHandler(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Agents, h.AllowRequestSessionKey, h.AllowedSessionKeyPrefixes = []string{"main", "ops"}, true, []string{"hook:"}
	})
	long := strings.Repeat("k", 300)
	for i, tc := range []struct {
		name, target, body string
		hdr                []string
		status             int
		sent               string // the gateway body ("" = not checked)
	}{
		{"byte order mark", "/hooks/wake", "\uFEFF{\"text\":\"bom\"}", nil, 200, `{"text":"bom","mode":"now"}`},
		{"white space", "/hooks/wake", "\n\t {\"text\":\"ws\"} \u00a0\n", nil, 200, `{"text":"ws","mode":"now"}`},
		{"array is {}", "/hooks/wake", `[1]`, nil, 400, ""},
		{"long idempotency key ignored", "/hooks/agent", `{"message":"m","deliver":false}`, []string{"Idempotency-Key", long}, 200, ""},
		{"wake routing fields", "/hooks/wake", `{"text":"t","agentId":"OPS","sessionKey":"hook:w"}`, nil, 200,
			`{"text":"t","mode":"now","agentId":"ops","sessionKey":"hook:w"}`},
		{"agent fields the gateway honours", "/hooks/agent",
			`{"message":"m","sessionMode":"persistent","sessionKey":"hook:p","deliver":false,"waitForCompletion":false}`, nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(gw.Received())
			w := serve(t, h, hookRequest{target: tc.target, body: tc.body, remote: "198.51.100." + string(rune('1'+i)),
				header: headers(auth, jsonCT, tc.hdr)})
			if w.Code != tc.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			got := gw.Received()
			if len(got) != n+1 {
				t.Fatalf("gateway received %d", len(got)-n)
			}
			if tc.sent != "" && string(got[n].Raw) != tc.sent {
				t.Fatalf("gateway body %s, want %s", got[n].Raw, tc.sent)
			}
			if got[n].IdempotencyKey == long {
				t.Fatal("an over-long key was used")
			}
		})
	}
}
