package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// TestMergeOverrideGatewayRules checks mergeOverride against the
// reference gateway's mergeAction (hooks mapping code of the pinned
// openclaw): which override values replace the rendered ones, by type.
func TestMergeOverrideGatewayRules(t *testing.T) {
	agentBase := fields{"message": "rendered", "name": "Tmpl", "agentId": "ops", "sessionKey": "hook:tmpl", "deliver": false,
		"wakeMode": "next-heartbeat", "mode": "next-heartbeat", "model": "m1", "timeoutSeconds": 30.0}
	wakeBase := fields{"text": "rendered text", "mode": "next-heartbeat", "wakeMode": "next-heartbeat", "agentId": "ops", "sessionKey": "hook:tmpl"}
	tests := []struct {
		name      string
		kind      actionKind
		base      fields
		templated bool // the mapping's session key is templated
		unsafe    bool // the mapping allows unsafe content
		override  map[string]any
		wantKind  actionKind
		want      fields
		wantKey   bool // key counts as request-supplied
		wantSafe  bool // allowUnsafeExternalContent after the merge
		wantErr   bool
	}{
		{name: "empty override (undefined) keeps everything", kind: kindAgent, base: agentBase, override: map[string]any{},
			wantKind: kindAgent, want: agentBase},
		{name: "message of another type keeps the rendered one", kind: kindAgent, base: agentBase,
			override: map[string]any{"message": 42.0, "deliver": "no", "wakeMode": "now", "allowUnsafeExternalContent": "yes"},
			wantKind: kindAgent, want: agentBase},
		{name: "typed values override", kind: kindAgent, base: agentBase, unsafe: true,
			override: map[string]any{"message": "new", "deliver": true, "allowUnsafeExternalContent": false},
			wantKind: kindAgent, want: with(agentBase, fields{"message": "new", "deliver": true})},
		{name: "null keeps, any other type replaces", kind: kindAgent, base: agentBase,
			override: map[string]any{"name": nil, "thinking": "high", "channel": 42.0, "timeoutSeconds": "30"},
			wantKind: kindAgent, want: with(agentBase, fields{"thinking": "high", "channel": 42.0, "timeoutSeconds": "30"})},
		{name: "agentId and to not usable strings mean the defaults", kind: kindAgent, base: agentBase,
			override: map[string]any{"agentId": 7.0, "to": false},
			wantKind: kindAgent, want: without(agentBase, "agentId")},
		{name: "wake agentId not a usable string means the default agent", kind: kindWake, base: wakeBase,
			override: map[string]any{"agentId": " "},
			wantKind: kindWake, want: fields{"text": "rendered text", "mode": "next-heartbeat", "sessionKey": "hook:tmpl"}},
		{name: "model not a usable string means the default model", kind: kindAgent, base: agentBase,
			override: map[string]any{"model": " "}, wantKind: kindAgent, want: without(agentBase, "model")},
		{name: "model of another type means the default model", kind: kindAgent, base: agentBase,
			override: map[string]any{"model": 3.0}, wantKind: kindAgent, want: without(agentBase, "model")},
		{name: "any kind but wake is agent", kind: kindWake, base: wakeBase, override: map[string]any{"kind": "shutdown", "message": "m"},
			wantKind: kindAgent, want: fields{"message": "m"}},
		{name: "kind WAKE is agent", kind: kindAgent, base: agentBase, override: map[string]any{"kind": "WAKE"},
			wantKind: kindAgent, want: agentBase},
		{name: "kind null keeps the mapping's", kind: kindWake, base: wakeBase, override: map[string]any{"kind": nil, "text": "t"},
			wantKind: kindWake, want: fields{"text": "t", "mode": "next-heartbeat", "agentId": "ops", "sessionKey": "hook:tmpl"}},
		{name: "agent to wake drops the agent fields", kind: kindAgent, base: agentBase, unsafe: true,
			override: map[string]any{"kind": "wake", "text": "woken", "name": "N"},
			wantKind: kindWake, want: fields{"text": "woken"}},
		{name: "wake mode only next-heartbeat overrides", kind: kindWake, base: wakeBase, override: map[string]any{"mode": "now"},
			wantKind: kindWake, want: fields{"text": "rendered text", "mode": "next-heartbeat", "agentId": "ops", "sessionKey": "hook:tmpl"}},
		{name: "wake to agent: wakeMode from the override", kind: kindWake, base: wakeBase,
			override: map[string]any{"kind": "agent", "message": "m", "wakeMode": "next-heartbeat"},
			wantKind: kindAgent, want: fields{"message": "m", "wakeMode": "next-heartbeat"}},
		{name: "string session key is request-supplied", kind: kindAgent, base: agentBase,
			override: map[string]any{"sessionKey": "hook:t"}, wantKind: kindAgent, want: with(agentBase, fields{"sessionKey": "hook:t"}), wantKey: true},
		{name: "sessionKeySource static", kind: kindAgent, base: agentBase, templated: true,
			override: map[string]any{"sessionKey": "hook:t", "sessionKeySource": "static"}, wantKind: kindAgent, want: with(agentBase, fields{"sessionKey": "hook:t"})},
		{name: "blank session key means none", kind: kindAgent, base: agentBase,
			override: map[string]any{"sessionKey": "  "}, wantKind: kindAgent, want: without(agentBase, "sessionKey"), wantKey: true},
		{name: "session key of another type over a static key means none", kind: kindAgent, base: agentBase,
			override: map[string]any{"sessionKey": 5.0}, wantKind: kindAgent, want: without(agentBase, "sessionKey")},
		{name: "session key of another type over a templated key fails", kind: kindAgent, base: agentBase, templated: true,
			override: map[string]any{"sessionKey": 5.0}, wantErr: true},
		{name: "null session key keeps a templated one", kind: kindAgent, base: agentBase, templated: true,
			override: map[string]any{"sessionKey": nil}, wantKind: kindAgent, want: agentBase, wantKey: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kind, unsafe, key := tc.kind, tc.unsafe, tc.templated
			base := with(tc.base, nil)
			got, err := mergeOverride(base, tc.override, &kind, &unsafe, &key)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("merge = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// an action carries only its kind's fields: mode for wake, wakeMode for agent
			want := without(tc.want, "mode")
			if tc.wantKind == kindWake {
				want = without(tc.want, "wakeMode")
			}
			if kind != tc.wantKind || !reflect.DeepEqual(got, want) || key != tc.wantKey {
				t.Fatalf("merge = %v %v key %v\nwant    %v %v key %v", kind, got, key, tc.wantKind, want, tc.wantKey)
			}
			wantUnsafe := tc.wantSafe
			if tc.name == "typed values override" || tc.name == "agent to wake drops the agent fields" {
				wantUnsafe = false
			}
			if unsafe != wantUnsafe {
				t.Fatalf("unsafe = %v, want %v", unsafe, wantUnsafe)
			}
			if !reflect.DeepEqual(base, tc.base) {
				t.Fatalf("merge changed the rendered fields: %v", base)
			}
		})
	}
}

// with returns a copy of f with extra laid over it.
func with(f, extra fields) fields {
	out := make(fields, len(f)+len(extra))
	for k, v := range f {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// without returns a copy of f without keys.
func without(f fields, keys ...string) fields {
	out := with(f, nil)
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// TestTransformParityThroughHandler: issue 13's transform bullet end to
// end: undefined dispatches the template-built action, null skips,
// deliver "no" does not turn delivery on, message 42 keeps the rendered
// message, name 42 means the default name.
func TestTransformParityThroughHandler(t *testing.T) {
	root := t.TempDir()
	for name, src := range map[string]string{
		"undef.js":   `export default () => undefined;`,
		"nothing.js": `export default () => {};`,
		"null.js":    `export default () => null;`,
		"types.js":   `export default () => ({ deliver: "no", message: 42, name: 42, model: "" });`,
		"array.js":   `export default () => ["not", "an", "object"];`,
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := func(id, module string) Mapping {
		return Mapping{ID: id, MatchPath: id, Name: "Tmpl", MessageTemplate: "rendered {{payload.n}}", Deliver: new(bool),
			Model: "m1", Transform: &TransformRef{Module: module}}
	}
	h, gw := mappedHandler(t, func(h *Handler) { h.TransformsRoot = root },
		tmpl("undef", "undef.js"), tmpl("nothing", "nothing.js"), tmpl("null", "null.js"), tmpl("types", "types.js"), tmpl("array", "array.js"))
	for _, tc := range []struct {
		path   string
		status int
		want   map[string]any // fields of the gateway body
	}{
		{"undef", http.StatusOK, map[string]any{"name": "Tmpl", "deliver": false, "model": "m1"}},
		{"nothing", http.StatusOK, map[string]any{"name": "Tmpl", "deliver": false, "model": "m1"}},
		{"array", http.StatusOK, map[string]any{"name": "Tmpl", "deliver": false, "model": "m1"}},
		{"null", http.StatusNoContent, nil},
		{"types", http.StatusOK, map[string]any{"name": nil, "deliver": false, "model": nil}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := len(gw.Received())
			w := postHook(t, h, tc.path, `{"n":1}`)
			if w.Code != tc.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tc.status)
			}
			got := gw.Received()[before:]
			if tc.want == nil {
				if len(got) != 0 {
					t.Fatalf("dispatched %d actions", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("dispatched %d actions, want 1", len(got))
			}
			body := got[0].Body
			if msg, _ := body["message"].(string); !strings.Contains(msg, "rendered 1") {
				t.Errorf("message %q, want the rendered one", msg)
			}
			for k, v := range tc.want {
				if body[k] != v {
					t.Errorf("%s = %v, want %v", k, body[k], v)
				}
			}
		})
	}
}

// paddedPush is a Gmail-style push with pad extra top-level keys and n
// messages.
func paddedPush(t testing.TB, pad, n int) string {
	p := map[string]any{}
	for i := range pad {
		p[fmt.Sprintf("%x", i)] = 1
	}
	msgs := make([]any, n)
	for i := range msgs {
		msgs[i] = map[string]any{"id": fmt.Sprintf("m%d", i), "from": "a@example.com", "subject": "s", "snippet": "x", "body": "b"}
	}
	p["messages"] = msgs
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// forEachHandler has the gmail preset and mapping "each": for_each over
// messages with a transform (budget 30 s: these measure work, not time).
func forEachHandler(tb testing.TB) (*Handler, *testGateway) {
	root := tb.TempDir()
	if err := os.WriteFile(filepath.Join(root, "each.js"), []byte(`export default (ctx) => ({ message: "each " + ctx.payload.messages[0].id });`), 0o644); err != nil {
		tb.Fatal(err)
	}
	return mappedHandler(tb, func(h *Handler) {
		keyPolicy(h)
		h.Presets = []string{"gmail"}
		h.TransformsRoot = root
		h.TransformTimeout = caddy.Duration(30 * time.Second)
	}, Mapping{ID: "each", MatchPath: "each", ForEach: "messages", MaxBody: 8 << 20, Transform: &TransformRef{Module: "each.js"}})
}

// TestForEachCostFollowsTheList reproduces issue 17 item 12: a Gmail push
// padded with many top-level keys must cost the padding once, not once per
// message, for the gmail preset (templates) and for a for_each mapping
// with a transform. Measured in bytes allocated per request, which a busy
// machine does not change: 100 messages cost less than twice what one
// message costs (copying the payload per message cost about 30 times).
func TestForEachCostFollowsTheList(t *testing.T) {
	h, gw := forEachHandler(t)
	one, many := paddedPush(t, 30000, 1), paddedPush(t, 30000, 100)
	for _, hook := range []string{"gmail", "each"} {
		t.Run(hook, func(t *testing.T) {
			cost := func(body string, want int) uint64 {
				var a, b runtime.MemStats
				before := len(gw.Received())
				runtime.ReadMemStats(&a)
				w := postHook(t, h, hook, body)
				runtime.ReadMemStats(&b)
				if w.Code != http.StatusOK || len(gw.Received())-before != want {
					t.Fatalf("%d %s, %d dispatched, want %d", w.Code, w.Body, len(gw.Received())-before, want)
				}
				return b.TotalAlloc - a.TotalAlloc
			}
			cost(one, 1) // warm up (transform runtimes, pools)
			c1, c100 := cost(one, 1), cost(many, 100)
			t.Logf("1 message: %d KiB, 100 messages: %d KiB (%.2f×)", c1>>10, c100>>10, float64(c100)/float64(c1))
			if c100 > 2*c1 {
				t.Fatalf("100 messages allocated %.1f times what 1 message did", float64(c100)/float64(c1))
			}
		})
	}
}

// TestHostileRegexpThroughHandler reproduces issue 17 item 1 through the
// handler: as many hostile requests as the pool has runtimes, each
// answered 500 by the time budget, leave the mapping serving: the next
// benign request is answered 200, not "no runtime free".
func TestHostileRegexpThroughHandler(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "label.js"), []byte(`export default (ctx) =>
  /^(?=[a-z])(\w+\s?)*$/i.test(ctx.payload.label) ? { message: "label " + ctx.payload.label } : null;`), 0o644); err != nil {
		t.Fatal(err)
	}
	h, gw := mappedHandler(t, func(h *Handler) { h.TransformsRoot = root }, Mapping{ID: "label", MatchPath: "label", Transform: &TransformRef{Module: "label.js"}})
	const attackers = 8 // the pool size on a 2-core machine, as in the report
	codes := make(chan int, attackers)
	for range attackers {
		go func() { codes <- postHook(t, h, "label", `{"label":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}`).Code }()
	}
	for range attackers {
		if c := <-codes; c != http.StatusInternalServerError {
			t.Fatalf("hostile request answered %d, want 500", c)
		}
	}
	if w := postHook(t, h, "label", `{"label":"hello world"}`); w.Code != http.StatusOK || len(gw.Received()) != 1 {
		t.Fatalf("benign request after the attack: %d %s, %d dispatched", w.Code, w.Body, len(gw.Received()))
	}
}

// BenchmarkForEachPadded is issue 17 item 12's request: a Gmail push with
// 100 messages through the gmail preset (templates), padded with 550,000
// extra top-level keys ("padded") or not ("plain"), and the same push
// through a for_each mapping with a transform, padded with 20,000 keys (a
// transform converts the payload to JavaScript, which the memory guard
// bounds; 550,000 keys exceed it). The difference between padded and
// plain is the padding's cost, which must be paid once per request, not
// once per message.
func BenchmarkForEachPadded(b *testing.B) {
	h, _ := forEachHandler(b)
	for _, tc := range []struct {
		hook string
		pad  int
	}{{"gmail", 0}, {"gmail", 550_000}, {"each", 0}, {"each", 20_000}} {
		body := paddedPush(b, tc.pad, 100)
		b.Run(fmt.Sprintf("%s/pad=%d", tc.hook, tc.pad), func(b *testing.B) {
			for b.Loop() {
				if w := postHook(b, h, tc.hook, body); w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// TestTemplateHeadersWithoutTokens: no template or transform sees a token
// header, aliases included.
func TestTemplateHeadersWithoutTokens(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.TokenHeaders = []string{"x-openclaw-token"} })
	got := h.router.templateHeaders(http.Header{"Authorization": {"Bearer t"}, "X-Service-Token": {"t"}, "X-Openclaw-Token": {"t"},
		"x-openclaw-token": {"t"}, "X-Github-Event": {"push"}})
	if len(got) != 1 || got["x-github-event"] != "push" {
		t.Fatalf("template headers %v", got)
	}
}

// TestSkipReasons (issue 31 item 5): a 204 says which mapping took the
// request and why it dispatched nothing; with trace set (a dry run, a
// debug log), the mappings passed over before it say which condition
// failed. Without trace nothing is collected.
func TestSkipReasons(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "null.js"), []byte(`export default () => null;`), 0o644); err != nil {
		t.Fatal(err)
	}
	h, gw := mappedHandler(t, func(h *Handler) { h.TransformsRoot = root },
		Mapping{ID: "by-source", MatchPath: "s", MatchSource: "other", TextTemplate: "x", Action: "wake"},
		Mapping{ID: "by-expr", MatchPath: "s", MatchExpr: `payload.kind == "x"`, TextTemplate: "x", Action: "wake"},
		Mapping{ID: "null", MatchPath: "s", MatchExpr: `payload.kind == "null"`, Transform: &TransformRef{Module: "null.js"}},
		Mapping{ID: "each", MatchPath: "e", ForEach: "items", Transform: &TransformRef{Module: "null.js"}},
	)
	passedS := []string{"by-source: match_source false", "by-expr: match_expr false"}
	for _, tc := range []struct {
		name, path, body string
		trace            bool
		status           int
		mapping, skip    string
		passed           []string
	}{
		{"transform null", "s", `{"kind":"null"}`, true, 204, "null", "mapping null: transform returned null", passedS},
		{"transform null, no trace", "s", `{"kind":"null"}`, false, 204, "null", "mapping null: transform returned null", nil},
		{"for_each empty", "e", `{"items":[]}`, true, 204, "each", "mapping each: for_each items has no elements (missing, empty or not a list)", nil},
		{"for_each missing", "e", `{}`, true, 204, "each", "mapping each: for_each items has no elements (missing, empty or not a list)", nil},
		{"for_each not a list", "e", `{"items":"a"}`, true, 204, "each", "mapping each: for_each items has no elements (missing, empty or not a list)", nil},
		{"for_each all null", "e", `{"items":[1,2]}`, true, 204, "each", "mapping each: transform returned null for each of the 2 elements of items", nil},
		{"no mapping matches", "s", `{"kind":"y"}`, true, 404, "", "", append(slices.Clone(passedS), "null: match_expr false")},
		{"matched", "s", `{"kind":"x","source":"other"}`, true, 200, "by-source", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(gw.Received())
			req := httptest.NewRequest(http.MethodPost, "/hooks/"+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", auth[1])
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = "127.0.0.1:1"
			ex := exchange{r: req, sub: tc.path, ip: clientAddr(req), now: time.Now(), route: "none", trace: tc.trace}
			status, _, herr := h.process(&ex)
			if herr != nil {
				status = herr.status
			}
			if status != tc.status || ex.mapping != tc.mapping || ex.skip != tc.skip || !slices.Equal(ex.passed, tc.passed) {
				t.Fatalf("%d mapping %q skip %q passed %q; want %d %q %q %q", status, ex.mapping, ex.skip, ex.passed, tc.status, tc.mapping, tc.skip, tc.passed)
			}
			if sent := len(gw.Received()) - n; (status == 200) != (sent == 1) {
				t.Fatalf("%d sent to the gateway with status %d", sent, status)
			}
		})
	}
}
