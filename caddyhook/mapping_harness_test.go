package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/boundary"
	"github.com/caddyhook/caddyhook/internal/devgw"
)

// sentAction is one action as the gateway received it, with an agent
// message taken out of its external-content wrapper.
type sentAction struct {
	Kind string `json:"kind"`
	// Source is the wrapper's Source line; "" for a wake or an unwrapped
	// (allow_unsafe_external_content) message.
	Source string `json:"source,omitempty"`
	// Body is the gateway body, its message replaced by the wrapped content.
	Body  map[string]any `json:"body"`
	RunID string         `json:"-"`
}

// wrappedMessage parses the external-content wrapper of boundary.Wrap.
var wrappedMessage = regexp.MustCompile(`(?s)\A` + regexp.QuoteMeta(boundary.Notice) +
	`\n\n<<<EXTERNAL_UNTRUSTED_CONTENT id="([0-9a-f]{16})">>>\nSource: (\w+)\n---\n(.*)\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="([0-9a-f]{16})">>>\z`)

// unwrapMessage returns the source and content of a wrapped message; ok is
// false when msg is not exactly one well-formed wrapper.
func unwrapMessage(msg string) (source, content string, ok bool) {
	m := wrappedMessage.FindStringSubmatch(msg)
	if m == nil || m[1] != m[4] {
		return "", "", false
	}
	return m[2], m[3], true
}

// sentActions converts what the gateway received. wrapped says whether
// agent messages must carry the wrapper (true) or must not (false).
func sentActions(t testing.TB, recs []devgw.Received, wrapped bool) []sentAction {
	t.Helper()
	out := make([]sentAction, 0, len(recs))
	for _, rec := range recs {
		a := sentAction{Kind: rec.Kind, Body: rec.Body, RunID: rec.RunID}
		if msg, isAgent := rec.Body["message"].(string); isAgent && rec.Kind == "agent" {
			src, content, ok := unwrapMessage(msg)
			switch {
			case wrapped && !ok:
				t.Errorf("agent message is not wrapped: %q", msg)
			case !wrapped && ok:
				t.Errorf("agent message is wrapped although the mapping allows unsafe content: %q", msg)
			case ok:
				a.Source = src
				a.Body = cloneBody(rec.Body)
				a.Body["message"] = content
			}
		}
		out = append(out, a)
	}
	return out
}

// cloneBody copies a gateway body (top level only).
func cloneBody(b map[string]any) map[string]any {
	c := make(map[string]any, len(b))
	for k, v := range b {
		c[k] = v
	}
	return c
}

// canonical is a's comparable JSON form (kind, source and body).
func (a sentAction) canonical() string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(a)
	return strings.TrimSuffix(b.String(), "\n")
}

// matchSent checks that got holds exactly the actions of want, in any
// order (a fan-out is dispatched in parallel), and returns the runIds of
// the gateway in want's order.
func matchSent(t testing.TB, got, want []sentAction) []string {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("gateway received %d actions, want %d:\n%s", len(got), len(want), describeSent(got))
	}
	left := slices.Clone(got)
	runIDs := make([]string, len(want))
	for i, w := range want {
		j := slices.IndexFunc(left, func(g sentAction) bool { return g.canonical() == w.canonical() })
		if j < 0 {
			t.Fatalf("action %d not received:\nwant %s\ngot:\n%s", i, w.canonical(), describeSent(left))
		}
		runIDs[i] = left[j].RunID
		left = slices.Delete(left, j, j+1)
	}
	return runIDs
}

// describeSent lists actions one per line.
func describeSent(acts []sentAction) string {
	var b strings.Builder
	for _, a := range acts {
		fmt.Fprintf(&b, "  %s\n", a.canonical())
	}
	return b.String()
}

// agentSent is an expected agent action whose message was wrapped with
// source.
func agentSent(source string, body map[string]any) sentAction {
	return sentAction{Kind: "agent", Source: source, Body: body}
}

// wakeSent is an expected wake action.
func wakeSent(text, mode string) sentAction {
	return sentAction{Kind: "wake", Body: map[string]any{"text": text, "mode": mode}}
}

// decodeReply decodes a JSON reply body into a map, failing the test if it
// is not one.
func decodeReply(t testing.TB, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("reply %q is not a JSON object: %v", body, err)
	}
	return m
}

// fanoutReply is the reply a fan-out of agent actions must produce for
// the gateway's runIds, in action order.
func fanoutReply(runIDs []string, dropped int) map[string]any {
	ids := make([]any, len(runIDs))
	for i, id := range runIDs {
		ids[i] = id
	}
	r := map[string]any{"ok": true, "runId": runIDs[0], "runIds": ids, "dispatched": float64(len(runIDs))}
	if dropped > 0 {
		r["dropped"] = float64(dropped)
	}
	return r
}

// mappedHandler provisions a handler with mappings ms in front of a
// recording gateway; mod, when set, adjusts the rest of the config first.
func mappedHandler(t testing.TB, mod func(h *Handler), ms ...Mapping) (*Handler, *testGateway) {
	t.Helper()
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = ms
		if mod != nil {
			mod(h)
		}
	})
	return h, gw
}

// keyPolicy lets templated session keys through: request keys allowed,
// with the hook: prefix.
func keyPolicy(h *Handler) {
	h.AllowRequestSessionKey = true
	h.AllowedSessionKeyPrefixes = []string{"hook:"}
}

// postHook posts body to /hooks/<name> with the hook token, a JSON content
// type and the extra header pairs.
func postHook(t testing.TB, h *Handler, name, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return serve(t, h, hookRequest{target: "/hooks/" + name, body: body, header: headers(auth, jsonCT, hdr)})
}

// provisionError provisions a handler with mappings ms (mod adjusting the
// rest) and returns the error, or "" when it provisioned.
func provisionError(t testing.TB, mod func(h *Handler), ms ...Mapping) string {
	t.Helper()
	h := validHandler()
	h.Mappings = ms
	if mod != nil {
		mod(h)
	}
	if err := provision(t, h); err != nil {
		return err.Error()
	}
	return ""
}

// postExpect posts body to /hooks/<name> like postHook, fails unless the
// reply has the given status, and returns the reply with what the gateway
// received meanwhile.
func postExpect(t testing.TB, h *Handler, gw *testGateway, name, body string, status int) (*httptest.ResponseRecorder, []devgw.Received) {
	t.Helper()
	before := len(gw.Received())
	w := postHook(t, h, name, body)
	if w.Code != status {
		t.Fatalf("status %d (%s), want %d", w.Code, w.Body, status)
	}
	return w, gw.Received()[before:]
}
