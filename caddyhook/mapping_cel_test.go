package caddyhook

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestMappingCELCompileErrors checks that a CEL expression that does not
// parse or type-check fails provision, naming the mapping, the field and
// the line:column within that field.
func TestMappingCELCompileErrors(t *testing.T) {
	tests := []struct {
		name    string
		mapping Mapping
		want    string // error prefix
		detail  string // and a fragment of CEL's own message
	}{
		{"match_expr syntax", Mapping{ID: "gh", MatchPath: "gh", MessageTemplate: "m", MatchExpr: `payload.a ==`},
			"mapping gh: match_expr: 1:13: cel: Syntax error", "mismatched input '<EOF>'"},
		{"match_expr undeclared variable", Mapping{ID: "gh", MatchPath: "gh", MessageTemplate: "m", MatchExpr: `body.a == 1`},
			"mapping gh: match_expr: 1:1: cel: undeclared reference to 'body'", ""},
		{"match_expr type error on line 2", Mapping{ID: "gh", MatchPath: "gh", MessageTemplate: "m",
			MatchExpr: "payload.a == 1 &&\n  path == 2"},
			"mapping gh: match_expr: 2:8: cel: found no matching overload for '_==_'", ""},
		{"match_expr not bool", Mapping{ID: "gh", MatchPath: "gh", MessageTemplate: "m", MatchExpr: `size(path)`},
			"mapping gh: match_expr: 1:1: cel: expression has type int, want bool", ""},
		{"default id named", Mapping{MatchPath: "gh", MessageTemplate: "m", MatchExpr: `headers.`},
			"mapping mapping-2: match_expr: 1:9: cel: Syntax error", ""},
		{"message_template placeholder", Mapping{ID: "tpl", MatchPath: "gh", MessageTemplate: "PR {{number}}\nby {{ cel: payload.user + nope }}"},
			"mapping tpl: message_template: 2:27: cel: undeclared reference to 'nope'", ""},
		{"text_template placeholder", Mapping{ID: "tpl", MatchPath: "gh", Action: "wake", TextTemplate: "{{ cel: path.size( }}"},
			"mapping tpl: text_template: 1:19: cel: Syntax error", ""},
		{"session_key placeholder", Mapping{ID: "tpl", MatchPath: "gh", MessageTemplate: "m", SessionKey: "hook:{{ cel: 1 + }}"},
			"mapping tpl: session_key: 1:17: cel: Syntax error", ""},
		{"reference placeholder", Mapping{ID: "tpl", MatchPath: "gh", MessageTemplate: "a {{ }} b"},
			"mapping tpl: message_template: 1:3: empty placeholder", ""},
		{"unterminated placeholder", Mapping{ID: "tpl", MatchPath: "gh", MessageTemplate: "ok\n  {{ name"},
			"mapping tpl: message_template: 2:3: unterminated {{", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first := Mapping{ID: "first", MatchPath: "first", MessageTemplate: "m"}
			got := provisionError(t, keyPolicy, first, tc.mapping)
			if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, tc.detail) {
				t.Fatalf("Provision error %q\nwant prefix %q containing %q", got, tc.want, tc.detail)
			}
		})
	}
}

// celCanary marks payload and header values that must never appear in a
// reply or a log line.
const celCanary = "CANARY-5f0c1e9a"

// TestMappingCELEvalFailures checks that a failing or too costly CEL
// evaluation, in match_expr or in a template, answers 400 "hook mapping
// failed: <id>" with nothing dispatched and no payload content in the
// reply or the log.
func TestMappingCELEvalFailures(t *testing.T) {
	const cross = `payload.items.all(a, payload.items.all(b, a + b >= 0.0))` // 10,000 steps over 100 items
	core, logs := observer.New(zapcore.DebugLevel)
	h, gw := mappedHandler(t, func(h *Handler) { h.CELCostLimit = 2000; h.logger = zap.New(core) },
		Mapping{ID: "costly-match", MatchPath: "costly-match", MatchExpr: cross, MessageTemplate: "m"},
		Mapping{ID: "costly-render", MatchPath: "costly-render", MessageTemplate: "r {{ cel: " + cross + " }}"},
		Mapping{ID: "bad-match", MatchPath: "bad-match", MatchExpr: `int(payload.secret) > 0`, MessageTemplate: "m"},
		Mapping{ID: "missing-key", MatchPath: "missing-key", MatchExpr: `payload.nope == payload.secret`, MessageTemplate: "m"},
		Mapping{ID: "not-bool", MatchPath: "not-bool", MatchExpr: `payload.secret`, MessageTemplate: "m"},
		Mapping{ID: "bad-render", MatchPath: "bad-render", MessageTemplate: "{{secret}} {{ cel: payload.secret + 1 }}"},
		Mapping{ID: "bad-header", MatchPath: "bad-header", Action: "wake", TextTemplate: `{{ cel: int(headers["x-secret"]) }}`},
		Mapping{ID: "bad-type", MatchPath: "bad-type", MessageTemplate: "{{ cel: type(payload.secret) }}"},
		Mapping{ID: "bad-element", MatchPath: "bad-element", ForEach: "items", MessageTemplate: "{{ cel: 10 / int(payload.items[0]) }}"},
	)

	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	body := `{"secret":"` + celCanary + `","items":[` + strings.Join(items, ",") + `]}`
	for _, id := range []string{"costly-match", "costly-render", "bad-match", "missing-key", "not-bool",
		"bad-render", "bad-header", "bad-type", "bad-element"} {
		t.Run(id, func(t *testing.T) {
			logs.TakeAll()
			w := postHook(t, h, id, body, "X-Secret", celCanary)
			want := map[string]any{"ok": false, "error": "hook mapping failed: " + id}
			if w.Code != 400 || !reflect.DeepEqual(decodeReply(t, w.Body.Bytes()), want) {
				t.Fatalf("%d %s, want 400 %v", w.Code, w.Body, want)
			}
			entries := logs.TakeAll()
			if len(entries) == 0 {
				t.Fatal("the rejection was not logged")
			}
			for _, e := range entries {
				if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, celCanary) {
					t.Errorf("log line leaks payload content: %s", line)
				}
			}
		})
	}
	if n := len(gw.Received()); n != 0 {
		t.Fatalf("gateway received %d actions from failed mappings", n)
	}
	// the same expressions within the default limit, over good values
	within, gw := mappedHandler(t, nil,
		Mapping{ID: "costly-match", MatchPath: "costly-match", MatchExpr: cross, Action: "wake", TextTemplate: "ok"},
		Mapping{ID: "bad-element", MatchPath: "bad-element", Action: "wake", ForEach: "items", TextTemplate: "{{ cel: 10 / int(payload.items[0]) }}"},
	)
	if w := postHook(t, within, "costly-match", body); w.Code != 200 {
		t.Fatalf("within the default cost limit: %d %s", w.Code, w.Body)
	}
	if w := postHook(t, within, "bad-element", `{"items":[1,2,5]}`); w.Code != 200 {
		t.Fatalf("fan-out without failing element: %d %s", w.Code, w.Body)
	}
	want := []sentAction{wakeSent("ok", "now"), wakeSent("10", "now"), wakeSent("5", "now"), wakeSent("2", "now")}
	matchSent(t, sentActions(t, gw.Received(), false), want)
}
