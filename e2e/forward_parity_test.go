//go:build openclaw

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestForwardParity sends the same requests to the real gateway directly
// and through caddyhook in forward mode (configured with the gateway's
// policy: agent main, session keys under hook:, no channel plugins, the
// gmail preset) and compares the answers: status, error text and reply
// shape. It covers the validation rules caddyhook checks at the edge
// before forwarding, so every refusal here is caddyhook's own, with the
// gateway's words.
func TestForwardParity(t *testing.T) {
	inst := locateOpenclaw(t)
	gw := newOpenclawGateway(t, inst)
	bin := testkit.CaddyBinary(t)
	forward := []string{"mode forward", "agents main", "channels last", "idempotency_headers x-openclaw-idempotency-key", "presets gmail"}
	cfg := edgeConfig{edgeToken: randomToken(t), gatewayToken: gw.hooksToken, sites: []edgeSite{
		{ln: listenLoopback(t), gateway: gw.addr(), extra: forward},
		// site 1: the edge assigns a default session key of its own
		{ln: listenLoopback(t), gateway: gw.addr(), extra: append(slices.Clone(forward), "default_session_key "+parityDefaultKey)},
	}}
	edge := startEdge(t, bin, cfg)
	direct := newHookClient(gw.baseURL()+"/hooks", gw.hooksToken, "")
	// the first run loads the gateway's agent runner: do it before comparing
	direct.do(t, request{sub: "/agent", body: []byte(`{"message":"warm-up","deliver":false}`)})
	via := edge.client(0, "")
	tag := randomToken(t)[:8]
	bom := "\uFEFF"
	longKey := strings.Repeat("k", 300)

	cases := []struct {
		name     string
		sub      string
		body     string // %s is replaced by a per-side unique tag
		headers  map[string]string
		textDiff bool // the error texts differ (listed in the README)
	}{
		{name: "wake", sub: "/wake", body: `{"text":"parity %s"}`},
		{name: "wake mode compared exactly", sub: "/wake", body: `{"text":"parity mode %s","mode":" next-heartbeat"}`},
		{name: "wake agentId number", sub: "/wake", body: `{"text":"%s","agentId":42}`},
		{name: "wake agentId empty", sub: "/wake", body: `{"text":"%s","agentId":""}`},
		{name: "wake agentId null", sub: "/wake", body: `{"text":"%s","agentId":null}`},
		{name: "wake agentId unknown", sub: "/wake", body: `{"text":"%s","agentId":"ghost"}`},
		{name: "wake agentId unusable", sub: "/wake", body: `{"text":"%s","agentId":"!!"}`},
		{name: "wake agentId case", sub: "/wake", body: `{"text":"parity case %s","agentId":"MAIN"}`},
		{name: "wake sessionKey empty", sub: "/wake", body: `{"text":"%s","sessionKey":""}`},
		{name: "wake sessionKey prefix", sub: "/wake", body: `{"text":"%s","sessionKey":"other:x"}`},
		{name: "wake sessionKey needs now", sub: "/wake", body: `{"text":"%s","sessionKey":"hook:w","mode":"next-heartbeat"}`},
		{name: "wake sessionKey", sub: "/wake", body: `{"text":"parity key %s","sessionKey":"hook:parity:%s"}`},
		{name: "byte order mark", sub: "/wake", body: bom + `{"text":"parity bom %s"}`},
		{name: "blank body", sub: "/wake", body: " \n\t "},
		{name: "array body", sub: "/wake", body: `[1]`},
		{name: "invalid JSON", sub: "/wake", body: `{"text":`, textDiff: true},

		{name: "waitForCompletion string", sub: "/agent", body: `{"message":"%s","waitForCompletion":"yes"}`},
		{name: "waitForCompletion first", sub: "/agent", body: `{"waitForCompletion":1}`},
		{name: "sessionMode unknown", sub: "/agent", body: `{"message":"%s","sessionMode":"forever","deliver":false}`},
		{name: "sessionMode null", sub: "/agent", body: `{"message":"%s","sessionMode":null}`},
		{name: "persistent without key", sub: "/agent", body: `{"message":"%s","sessionMode":"persistent","deliver":false}`},
		{name: "agentId number", sub: "/agent", body: `{"message":"%s","agentId":42}`},
		{name: "agentId empty", sub: "/agent", body: `{"message":"%s","agentId":""}`},
		{name: "agentId unknown", sub: "/agent", body: `{"message":"%s","agentId":"ghost"}`},
		{name: "to empty", sub: "/agent", body: `{"message":"%s","to":""}`},
		{name: "to number", sub: "/agent", body: `{"message":"%s","to":42}`},
		{name: "to null", sub: "/agent", body: `{"message":"%s","to":null}`},
		{name: "to without channel", sub: "/agent", body: `{"message":"%s","to":"x"}`},
		{name: "channel without to", sub: "/agent", body: `{"message":"%s","channel":"last"}`},
		{name: "channel last with to", sub: "/agent", body: `{"message":"%s","channel":"last","to":"x"}`},
		{name: "channel unknown", sub: "/agent", body: `{"message":"%s","channel":"sms","to":""}`},
		{name: "accountId without route", sub: "/agent", body: `{"message":"%s","accountId":"a"}`},
		{name: "accountId empty", sub: "/agent", body: `{"message":"%s","accountId":""}`},
		{name: "model empty", sub: "/agent", body: `{"message":"%s","model":""}`},
		{name: "model null", sub: "/agent", body: `{"message":"%s","model":null}`},
		{name: "sessionKey prefix", sub: "/agent", body: `{"message":"%s","sessionKey":"other:1"}`},
		{name: "agent accepted, channel ignored when not delivering", sub: "/agent",
			body: `{"message":"parity %s","deliver":false,"channel":"sms","to":42}`},
		{name: "over-long Idempotency-Key ignored", sub: "/agent", body: `{"message":"parity long %s","deliver":false}`,
			headers: map[string]string{"Idempotency-Key": longKey}},

		{name: "gmail fan-out", sub: "/gmail", body: `{"messages":[{"id":"%s-1","from":"a@b","subject":"s","snippet":"x","body":"y"},` +
			`{"id":"%s-2","from":"c@d","subject":"t","snippet":"z","body":"w"}]}`},
		{name: "gmail without messages", sub: "/gmail", body: `{"messages":[]}`},
		{name: "unknown hook", sub: "/nothing", body: `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			send := func(c *hookClient, side string) reply {
				body := strings.ReplaceAll(tc.body, "%s", side+"-"+tag)
				return c.do(t, request{sub: tc.sub, body: []byte(body), headers: tc.headers})
			}
			d, e := send(direct, "direct"), send(via, "edge")
			// A busy gateway may not start a run within its 15 s admission
			// deadline (503, passed through by caddyhook): that is load,
			// not a difference, so such a pair is sent again.
			for try := 1; try < 4 && (admissionTimeout(d) || admissionTimeout(e)); try++ {
				t.Logf("try %d: gateway %d, caddyhook %d (admission timeout); again", try, d.status, e.status)
				d, e = send(direct, fmt.Sprintf("direct%d", try)), send(via, fmt.Sprintf("edge%d", try))
			}
			if d.status != e.status {
				t.Fatalf("status: gateway %d %.200s, caddyhook %d %.200s", d.status, d.body, e.status, e.body)
			}
			if d.status >= 400 {
				if !tc.textDiff && d.str("error") != e.str("error") {
					t.Fatalf("error: gateway %q, caddyhook %q", d.str("error"), e.str("error"))
				}
				return
			}
			if dk, ek := replyShape(d), replyShape(e); dk != ek {
				t.Fatalf("reply shape: gateway %s (%.200s), caddyhook %s (%.200s)", dk, d.body, ek, e.body)
			}
			if e.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Fatal("caddyhook's answer lacks X-Content-Type-Options: nosniff")
			}
		})
	}

	t.Run("the edge's default session key wins over a sessionKey read as none", func(t *testing.T) {
		// issue 21 item 4: the gateway reads the last of duplicate members
		withDefault := edge.client(1, "")
		var runs []string
		for _, key := range []string{"null", `""`, `"  "`} {
			r := withDefault.do(t, request{sub: "/agent", body: []byte(`{"message":"parity default key ` + tag + `","deliver":false,"sessionKey":` + key + `}`)})
			wantStatus(t, "sessionKey "+key, r, http.StatusOK)
			runs = append(runs, r.str("runId"))
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			logged, err := readHookRuns(gw.fileLogPath())
			if err != nil {
				t.Fatal(err)
			}
			done := 0
			for _, id := range runs {
				if rec, ok := logged[id]; ok {
					done++
					if !strings.Contains(rec.LogicalSessionKey, parityDefaultKey) {
						t.Fatalf("run %s ran in session %q, want the edge's %s", id, rec.LogicalSessionKey, parityDefaultKey)
					}
				}
			}
			if done == len(runs) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d runs logged by the gateway", done, len(runs))
			}
		}
	})

	t.Run("idempotency across header aliases and the body field", func(t *testing.T) {
		for _, c := range []*hookClient{direct, via} {
			key := fmt.Sprintf("parity-idem-%s-%p", tag, c)
			body := []byte(`{"message":"parity idem ` + tag + `","deliver":false}`)
			first := c.do(t, request{sub: "/agent", body: body, headers: map[string]string{"x-openclaw-idempotency-key": key}})
			again := c.do(t, request{sub: "/agent", body: body, headers: map[string]string{"Idempotency-Key": " " + key + " "}})
			field := c.do(t, request{sub: "/agent", body: []byte(`{"message":"parity idem ` + tag + `","deliver":false,"idempotencyKey":"` + key + `"}`)})
			wantStatus(t, "first", first, http.StatusOK)
			if again.str("runId") != first.str("runId") || field.str("runId") != first.str("runId") {
				t.Fatalf("%s: runIds %q, %q, %q: want one run", c.base, first.str("runId"), again.str("runId"), field.str("runId"))
			}
		}
	})
}

// parityDefaultKey is the default_session_key of TestForwardParity's
// second site.
const parityDefaultKey = "hook:parity-default"

// admissionTimeout reports the gateway's 503 for a run that did not
// start within its admission deadline.
func admissionTimeout(r reply) bool {
	return r.status == http.StatusServiceUnavailable && r.str("error") == "hook agent run did not start before admission timeout"
}

// replyShape is the sorted key set of a reply, with the length of runIds.
func replyShape(r reply) string {
	keys := make([]string, 0, len(r.json))
	for k := range r.json {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Sprintf("%v runIds=%d", keys, len(r.strs("runIds")))
}
