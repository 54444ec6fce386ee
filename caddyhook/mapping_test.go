package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// TestMappingProvisionErrors checks the mapping config errors other than
// CEL and session keys (see their own tests): each names the mapping and
// the field.
func TestMappingProvisionErrors(t *testing.T) {
	ok := Mapping{ID: "ok", MatchPath: "ok", MessageTemplate: "m"}
	tests := []struct {
		name     string
		mappings []Mapping
		presets  []string
		want     string
	}{
		{"unknown action", []Mapping{{ID: "a", Action: "notify", MessageTemplate: "m"}},
			nil, `mapping a: action: "notify" must be agent or wake`},
		{"unknown wake mode", []Mapping{{ID: "a", WakeMode: "later", MessageTemplate: "m"}},
			nil, `mapping a: wake_mode: "later" must be now or next-heartbeat`},
		{"built-in wake", []Mapping{{ID: "a", MatchPath: "/wake", MessageTemplate: "m"}},
			nil, `mapping a: match_path: "wake" is a built-in hook and cannot be mapped`},
		{"built-in agent", []Mapping{{ID: "a", MatchPath: "agent/", MessageTemplate: "m"}},
			nil, `mapping a: match_path: "agent" is a built-in hook and cannot be mapped`},
		{"negative timeout", []Mapping{{ID: "a", TimeoutSeconds: -1, MessageTemplate: "m"}},
			nil, "mapping a: timeout_seconds: must be positive"},
		{"max_body too large", []Mapping{{ID: "a", MaxBody: 64<<20 + 1, MessageTemplate: "m"}},
			nil, "mapping a: max_body: must be between 1 byte and 64 MiB"},
		{"negative max_body", []Mapping{{ID: "a", MaxBody: -1, MessageTemplate: "m"}},
			nil, "mapping a: max_body: must be between 1 byte and 64 MiB"},
		{"nested for_each", []Mapping{{ID: "a", ForEach: "data.items", MessageTemplate: "m"}},
			nil, `mapping a: for_each: "data.items" must be a top-level payload key`},
		{"indexed for_each", []Mapping{{ID: "a", ForEach: "items[0]", MessageTemplate: "m"}},
			nil, `mapping a: for_each: "items[0]" must be a top-level payload key`},
		{"blocked for_each", []Mapping{{ID: "a", ForEach: "__proto__", MessageTemplate: "m"}},
			nil, `mapping a: for_each: "__proto__" must be a top-level payload key`},
		{"agent without message", []Mapping{{ID: "a", TextTemplate: "t"}},
			nil, "mapping a: message_template: required for an agent mapping without a transform"},
		{"wake without text", []Mapping{{ID: "a", Action: "wake", MessageTemplate: "m"}},
			nil, "mapping a: text_template: required for a wake mapping without a transform"},
		{"default id in errors", []Mapping{ok, {Action: "wake"}},
			nil, "mapping mapping-2: text_template: required for a wake mapping without a transform"},
		{"duplicate id", []Mapping{ok, {ID: " ok ", MatchPath: "other", MessageTemplate: "m"}},
			nil, "mapping ok: id: used by an earlier mapping"},
		{"default id taken", []Mapping{{ID: "mapping-2", MessageTemplate: "m"}, {MessageTemplate: "m"}},
			nil, "mapping mapping-2: id: used by an earlier mapping"},
		{"id of a preset taken", []Mapping{{ID: "gmail", MatchPath: "mail", MessageTemplate: "m"}},
			[]string{"gmail"}, "mapping gmail: id: used by an earlier mapping"},
		{"unknown preset", []Mapping{ok}, []string{"gmail", "outlook"}, `presets: unknown preset "outlook" (known: gmail)`},
		{"require_token without verify", []Mapping{{ID: "a", MessageTemplate: "m", RequireToken: true}},
			nil, "mapping a: require_token: only meaningful with verify (a mapping without verify always requires the token)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := provisionError(t, func(h *Handler) {
				keyPolicy(h)
				h.Presets = tc.presets
			}, tc.mappings...)
			if got != tc.want {
				t.Fatalf("Provision error %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMappingMaxBody checks the body limits: the gmail preset accepts a
// push larger than the default limit that /agent refuses with 413, and a
// mapping's own max_body applies once it matched, also when another
// mapping allowed the read.
func TestMappingMaxBody(t *testing.T) {
	h, gw := mappedHandler(t, func(h *Handler) {
		keyPolicy(h)
		h.Presets = []string{"gmail"}
	},
		Mapping{ID: "small", MatchPath: "upload", MatchSource: "small", MaxBody: 1 << 10, Action: "wake", TextTemplate: "small"},
		Mapping{ID: "large", MatchPath: "upload", MaxBody: 512 << 10, Action: "wake", TextTemplate: "large"},
		Mapping{ID: "tiny", MatchPath: "tiny", MaxBody: 64, Action: "wake", TextTemplate: "tiny"},
	)
	pad := func(n int) string { return strings.Repeat("x", n) }
	gmailBody := func(size int) string {
		// three messages whose bodies add up to about size bytes
		var msgs []string
		for i := range 3 {
			msgs = append(msgs, fmt.Sprintf(`{"id":"m%d","from":"a@b.c","subject":"s%d","body":"%s"}`, i, i, pad(size/3)))
		}
		return `{"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	tests := []struct {
		name     string
		path     string
		body     string
		status   int
		dispatch int
	}{
		{"gmail push of 300 KB", "gmail", gmailBody(300_000), 200, 3},
		{"gmail push over the gmail bound", "gmail", gmailBody(gmailMaxBody), 413, 0},
		{"agent of 300 KB", "agent", `{"message":"` + pad(300_000) + `"}`, 413, 0},
		{"agent within 256 KiB", "agent", `{"message":"` + pad(200_000) + `"}`, 200, 1},
		{"large mapping, 300 KB", "upload", `{"data":"` + pad(300_000) + `"}`, 200, 1},
		{"small mapping within its limit", "upload", `{"source":"small"}`, 200, 1},
		{"small mapping over its limit", "upload", `{"source":"small","data":"` + pad(2000) + `"}`, 413, 0},
		{"tiny mapping over its limit", "tiny", `{"data":"` + pad(100) + `"}`, 413, 0},
		{"unmapped name keeps the default limit", "other", `{"data":"` + pad(300_000) + `"}`, 413, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, got := postExpect(t, h, gw, tc.path, tc.body, tc.status)
			if n := len(got); n != tc.dispatch {
				t.Fatalf("gateway received %d actions, want %d", n, tc.dispatch)
			}
			if tc.status == http.StatusRequestEntityTooLarge {
				if want := map[string]any{"ok": false, "error": reasonTooLarge}; !reflect.DeepEqual(decodeReply(t, w.Body.Bytes()), want) {
					t.Fatalf("reply %s, want %v", w.Body, want)
				}
			}
		})
	}
}

// TestMappingReferenceJSON checks that mappings written in the reference
// gateway's camelCase shape work unchanged, and that snake_case fields win
// where both are given.
func TestMappingReferenceJSON(t *testing.T) {
	const cfg = `{"mappings":[
		{"match":{"path":"x"},"messageTemplate":"x says {{text}}"},
		{"id":"ci","match":{"path":"ci","source":"jenkins"},"action":"wake","wakeMode":"next-heartbeat",
			"textTemplate":"build {{build.number}}: {{build.status}}"},
		{"id":"mail","match":{"path":"/mail/"},"action":"agent","name":"Mail","agentId":"ops","sessionKey":"hook:mail:{{messages[0].id}}",
			"messageTemplate":"From {{messages[0].from}}","forEach":"messages","deliver":false,"channel":"slack","to":"#mail",
			"model":"openai/gpt-5","thinking":"low","timeoutSeconds":90,"allowUnsafeExternalContent":true},
		{"id":"both","match_path":"snake","match":{"path":"camel"},"message_template":"snake","messageTemplate":"camel"}
	]}`
	h, gw := mappedHandler(t, func(h *Handler) {
		if err := json.Unmarshal([]byte(cfg), h); err != nil {
			t.Fatal(err)
		}
		keyPolicy(h)
		h.DefaultSessionKey = "hook:ref"
	})
	tests := []struct {
		path string
		body string
		want []sentAction
	}{
		{"x", `{"text":"hi"}`, []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"message": "x says hi", "sessionKey": "hook:ref"})}},
		{"ci", `{"source":"jenkins","build":{"number":7,"status":"FAILURE"}}`, []sentAction{wakeSent("build 7: FAILURE", "next-heartbeat")}},
		{"mail", `{"messages":[{"id":"a","from":"x@y"},{"id":"b","from":"z@w"}]}`, []sentAction{
			// no delivery: channel and to are neither checked nor sent
			{Kind: "agent", Body: map[string]any{"message": "From x@y", "name": "Mail", "agentId": "ops", "sessionKey": "hook:mail:a",
				"deliver": false, "model": "openai/gpt-5", "thinking": "low", "timeoutSeconds": float64(90)}},
			{Kind: "agent", Body: map[string]any{"message": "From z@w", "name": "Mail", "agentId": "ops", "sessionKey": "hook:mail:b",
				"deliver": false, "model": "openai/gpt-5", "thinking": "low", "timeoutSeconds": float64(90)}},
		}},
		{"snake", `{}`, []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"message": "snake", "sessionKey": "hook:ref"})}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, got := postExpect(t, h, gw, tc.path, tc.body, http.StatusOK)
			wrapped := tc.path != "mail"
			matchSent(t, sentActions(t, got, wrapped), tc.want)
		})
	}
	if w := postHook(t, h, "camel", `{}`); w.Code != http.StatusNotFound {
		t.Fatalf("camel path of a mapping with match_path: %d, want 404", w.Code)
	}
}
