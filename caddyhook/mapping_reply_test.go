package caddyhook

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// TestMappingReplies checks every reply shape of a mapped hook: the
// gateway's own reply for one action, the composed fan-out reply, the 400s
// of a rendered-empty message or text, 404 without a match and 204 for an
// empty fan-out.
func TestMappingReplies(t *testing.T) {
	h, gw := mappedHandler(t, func(h *Handler) { h.DefaultSessionKey = "hook:replies" },
		Mapping{ID: "deploy", MatchPath: "deploy", Action: "wake", WakeMode: "next-heartbeat", TextTemplate: "deployed {{service}}"},
		Mapping{ID: "note", MatchPath: "note", MessageTemplate: "note: {{text}}", AllowUnsafeExternalContent: true},
		Mapping{ID: "batch", MatchPath: "batch", ForEach: "items", MessageTemplate: "{{items[0].label}}", AllowUnsafeExternalContent: true},
		Mapping{ID: "pings", MatchPath: "pings", Action: "wake", ForEach: "items", TextTemplate: "ping {{items[0].n}}"},
		Mapping{ID: "quiet", MatchPath: "quiet", MessageTemplate: "{{text}}"},
		Mapping{ID: "silent", MatchPath: "silent", Action: "wake", TextTemplate: "  {{text}}  "},
	)
	type gwReply = func(runIDs []string) map[string]any
	single := func(ids []string) map[string]any { return map[string]any{"ok": true, "runId": ids[0]} }
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		want   []sentAction
		reply  gwReply // nil: plain or empty body, see text
		text   string  // the exact plain body when reply is nil
	}{
		{name: "wake", path: "deploy", body: `{"service":"api"}`, status: 200,
			want: []sentAction{wakeSent("deployed api", "next-heartbeat")},
			reply: func([]string) map[string]any {
				return map[string]any{"ok": true, "mode": "next-heartbeat", "eventOutcome": "enqueued"}
			}},
		{name: "one agent action", path: "note", body: `{"text":"hello"}`, status: 200,
			want:  []sentAction{unwrappedAgent("note: hello")},
			reply: single},
		{name: "fan-out of one", path: "batch", body: `{"items":[{"label":"item 1"}]}`, status: 200,
			want:  []sentAction{unwrappedAgent("item 1")},
			reply: single},
		{name: "agent fan-out", path: "batch", body: `{"items":[{"label":"item 1"},{"label":"item 2"},{"label":"item 3"}]}`, status: 200,
			want:  []sentAction{unwrappedAgent("item 1"), unwrappedAgent("item 2"), unwrappedAgent("item 3")},
			reply: func(ids []string) map[string]any { return fanoutReply(ids, 0) }},
		{name: "wake fan-out", path: "pings", body: `{"items":[{"n":1},{"n":2}]}`, status: 200,
			want: []sentAction{wakeSent("ping 1", "now"), wakeSent("ping 2", "now")},
			reply: func([]string) map[string]any {
				// the gateway's wake reply shape, with its eventOutcome
				return map[string]any{"ok": true, "mode": "now", "eventOutcome": "enqueued"}
			}},
		{name: "empty fan-out", path: "batch", body: `{"items":[]}`, status: 204},
		{name: "fan-out list missing", path: "batch", body: `{"other":[1]}`, status: 204},
		{name: "fan-out list not a list", path: "batch", body: `{"items":{"n":1}}`, status: 204},
		{name: "one element renders empty", path: "batch", body: `{"items":[{"label":"item 1"},{},{"label":"item 3"}]}`, status: 400,
			reply: func([]string) map[string]any {
				return map[string]any{"ok": false, "error": "hook mapping batch requires message"}
			}},
		{name: "message renders empty", path: "quiet", body: `{"text":"   "}`, status: 400,
			reply: func([]string) map[string]any {
				return map[string]any{"ok": false, "error": "hook mapping quiet requires message"}
			}},
		{name: "message value missing", path: "quiet", body: `{}`, status: 400,
			reply: func([]string) map[string]any {
				return map[string]any{"ok": false, "error": "hook mapping quiet requires message"}
			}},
		{name: "text renders empty", path: "silent", body: `{"text":null}`, status: 400,
			reply: func([]string) map[string]any {
				return map[string]any{"ok": false, "error": "hook mapping silent requires text"}
			}},
		{name: "no mapping", path: "nothing", body: `{}`, status: 404, text: "Not Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, got := postExpect(t, h, gw, tc.path, tc.body, tc.status)
			runIDs := matchSent(t, sentActions(t, got, false), tc.want)
			if tc.reply == nil {
				if got := strings.TrimSpace(w.Body.String()); got != tc.text {
					t.Fatalf("body %q, want %q", got, tc.text)
				}
				return
			}
			if got, want := decodeReply(t, w.Body.Bytes()), tc.reply(runIDs); !reflect.DeepEqual(got, want) {
				t.Fatalf("reply %s, want %v", w.Body, want)
			}
		})
	}
}

// unwrappedAgent is an expected agent action of the reply tests: message
// as is, the configured default session key.
func unwrappedAgent(message string) sentAction {
	return sentAction{Kind: "agent", Body: map[string]any{"message": message, "sessionKey": "hook:replies"}}
}

// TestMappingFanoutCap sends a gmail push of 250 messages: the first 200
// are dispatched, 50 dropped and counted in the reply.
func TestMappingFanoutCap(t *testing.T) {
	const n, dispatched = 250, 200
	h, gw := mappedHandler(t, func(h *Handler) {
		keyPolicy(h)
		h.Presets = []string{"gmail"}
	})
	msgs := make([]string, n)
	want := make([]sentAction, dispatched)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"id":"m%03d","from":"sender%d@example.com","subject":"subject %d","snippet":"snippet %d"}`, i, i, i, i)
		if i < dispatched {
			want[i] = agentSent(boundary.SourceEmail, map[string]any{"name": "Gmail", "wakeMode": "now",
				"sessionKey": fmt.Sprintf("hook:gmail:m%03d", i),
				"message":    fmt.Sprintf("New email from sender%d@example.com\nSubject: subject %d\nsnippet %d", i, i, i)})
		}
	}
	w := postHook(t, h, "gmail", `{"messages":[`+strings.Join(msgs, ",")+`]}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d (%s)", w.Code, w.Body)
	}
	runIDs := matchSent(t, sentActions(t, gw.Received(), true), want)
	if got, want := decodeReply(t, w.Body.Bytes()), fanoutReply(runIDs, n-dispatched); !reflect.DeepEqual(got, want) {
		t.Fatalf("reply %s\nwant %v", w.Body, want)
	}
}

// TestMappingFanoutIdempotent replays a fan-out under one Idempotency-Key:
// the replay gets the first reply and dispatches nothing; another batch
// under the same key is a new request.
func TestMappingFanoutIdempotent(t *testing.T) {
	h, gw := mappedHandler(t, func(h *Handler) {
		keyPolicy(h)
		h.Presets = []string{"gmail"}
	})
	batch := `{"messages":[{"id":"a","subject":"one"},{"id":"b","subject":"two"}]}`
	first := postHook(t, h, "gmail", batch, "Idempotency-Key", "push-1")
	replay := postHook(t, h, "gmail", batch, "Idempotency-Key", "push-1")
	if first.Code != http.StatusOK || replay.Code != http.StatusOK || replay.Body.String() != first.Body.String() {
		t.Fatalf("replay: %d %s, first %d %s", replay.Code, replay.Body, first.Code, first.Body)
	}
	if n := len(gw.Received()); n != 2 {
		t.Fatalf("gateway received %d actions, want 2", n)
	}
	other := postHook(t, h, "gmail", `{"messages":[{"id":"c","subject":"three"}]}`, "Idempotency-Key", "push-1")
	if other.Code != http.StatusOK || other.Body.String() == first.Body.String() || len(gw.Received()) != 3 {
		t.Fatalf("other batch, same key: %d %s, gateway %d", other.Code, other.Body, len(gw.Received()))
	}
	keys := map[string]bool{}
	for _, rec := range gw.Received() {
		keys[rec.IdempotencyKey] = true
	}
	if len(keys) != 3 {
		t.Fatalf("gateway saw %d distinct Idempotency-Keys, want one per action (3)", len(keys))
	}
}
