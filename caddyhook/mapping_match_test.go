package caddyhook

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// wakeMapping is a wake mapping that announces its own id, so a test can
// see which mapping answered.
func wakeMapping(id, path, source, expr string) Mapping {
	return Mapping{ID: id, MatchPath: path, MatchSource: source, MatchExpr: expr, Action: "wake", TextTemplate: "by " + id}
}

// TestMappingMatchOrder checks that configured mappings are tried in order
// before the presets, that the first match wins, and how match_path,
// match_source and match_expr select.
func TestMappingMatchOrder(t *testing.T) {
	h, gw := mappedHandler(t, func(h *Handler) {
		keyPolicy(h)
		h.Presets = []string{"gmail"}
	},
		wakeMapping("by-source", "events", "ci", ""),
		wakeMapping("by-header", "events", "", `"x-kind" in headers && headers["x-kind"] == "deploy"`),
		wakeMapping("by-query", "events", "", `query[?"env"].orValue("") == "prod"`),
		wakeMapping("by-payload", "events", "", `has(payload.level) && payload.level >= 3`),
		wakeMapping("events-rest", "/events/", "", ""),
		wakeMapping("nested", "ci/builds", "", ""),
		wakeMapping("gmail-custom", "gmail", "custom", ""),
		wakeMapping("unguarded", "strict", "", `headers["x-kind"] == "deploy"`),
		wakeMapping("any-path", "", "", `path.startsWith("x-")`),
	)
	tests := []struct {
		name    string
		target  string
		body    string
		hdr     []string
		status  int
		wantBy  string // the wake mapping that answered
		wantPre bool   // the gmail preset answered
	}{
		{"source and header: first wins", "events", `{"source":"ci"}`, []string{"X-Kind", "deploy"}, 200, "by-source", false},
		{"header", "events", `{"source":"cd"}`, []string{"X-Kind", "deploy"}, 200, "by-header", false},
		{"header name case-insensitive", "events", `{}`, []string{"x-KIND", "deploy"}, 200, "by-header", false},
		{"header before query", "events?env=prod", `{}`, []string{"X-Kind", "deploy"}, 200, "by-header", false},
		{"query", "events?env=prod", `{}`, nil, 200, "by-query", false},
		{"payload expression", "events", `{"level":4}`, nil, 200, "by-payload", false},
		{"payload expression false", "events", `{"level":2}`, nil, 200, "events-rest", false},
		{"source must be a string", "events", `{"source":5}`, nil, 200, "events-rest", false},
		{"source compared exactly", "events", `{"source":"CI"}`, nil, 200, "events-rest", false},
		{"catch-all of the path", "events", `{}`, nil, 200, "events-rest", false},
		{"trailing slash on the request", "events/", `{}`, nil, 200, "events-rest", false},
		{"nested hook name", "ci/builds", `{}`, nil, 200, "nested", false},
		{"configured before preset", "gmail", `{"source":"custom","messages":[{"id":"a"}]}`, nil, 200, "gmail-custom", false},
		{"preset after configured", "gmail", `{"source":"gmail","messages":[{"id":"a","subject":"s"}]}`, nil, 200, "", true},
		{"any path with expression", "x-anything", `{}`, nil, 200, "any-path", false},
		{"no mapping", "other", `{}`, nil, 404, "", false},
		// a missing map key is a CEL evaluation error, not a non-match
		{"unguarded expression with the header", "strict", `{}`, []string{"X-Kind", "deploy"}, 200, "unguarded", false},
		{"unguarded expression without the header", "strict", `{}`, nil, 400, "", false},
		{"no mapping for a prefix of a name", "ci", `{}`, nil, 404, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(gw.Received())
			w := postHook(t, h, tc.target, tc.body, tc.hdr...)
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			got := gw.Received()[before:]
			switch {
			case tc.status != http.StatusOK:
				if len(got) != 0 {
					t.Fatalf("gateway received %d actions for a %d", len(got), tc.status)
				}
			case len(got) != 1:
				t.Fatalf("gateway received %d actions, want 1", len(got))
			case tc.wantPre:
				if got[0].Kind != "agent" || got[0].Body["name"] != "Gmail" {
					t.Fatalf("want the gmail preset's agent action, got %s %v", got[0].Kind, got[0].Body)
				}
			default:
				if want := map[string]any{"text": "by " + tc.wantBy, "mode": "now"}; got[0].Kind != "wake" || !reflect.DeepEqual(got[0].Body, want) {
					t.Fatalf("got %s %v, want wake %v", got[0].Kind, got[0].Body, want)
				}
			}
		})
	}
}

// TestMappingShadowWarning checks the provision warning for a mapping that
// an earlier one always pre-empts, and its absence otherwise.
func TestMappingShadowWarning(t *testing.T) {
	m := func(id, path, source, expr string) Mapping { return wakeMapping(id, path, source, expr) }
	tests := []struct {
		name     string
		mappings []Mapping
		presets  []string
		want     [][2]string // mapping, shadowed_by
	}{
		{"distinct paths", []Mapping{m("a", "x", "", ""), m("b", "y", "", "")}, nil, nil},
		{"same path, no condition", []Mapping{m("a", "x", "", ""), m("b", "x", "", "")}, nil, [][2]string{{"b", "a"}}},
		{"path written with slashes", []Mapping{m("a", "/x/", "", ""), m("b", "x", "", "")}, nil, [][2]string{{"b", "a"}}},
		{"any path shadows every later one", []Mapping{m("a", "", "", ""), m("b", "x", "", ""), m("c", "", "", "")}, nil,
			[][2]string{{"b", "a"}, {"c", "a"}}},
		{"specific path does not shadow any path", []Mapping{m("a", "x", "", ""), m("b", "", "", "")}, nil, nil},
		{"earlier source condition", []Mapping{m("a", "x", "ci", ""), m("b", "x", "", "")}, nil, nil},
		{"earlier expression", []Mapping{m("a", "x", "", "true"), m("b", "x", "", "")}, nil, nil},
		{"later conditions do not help", []Mapping{m("a", "x", "", ""), m("b", "x", "ci", `path == "x"`)}, nil, [][2]string{{"b", "a"}}},
		{"first shadowing mapping named", []Mapping{m("a", "x", "", ""), m("b", "x", "", ""), m("c", "x", "", "")}, nil,
			[][2]string{{"b", "a"}, {"c", "a"}}},
		{"configured gmail mapping shadows the preset", []Mapping{m("mine", "gmail", "", "")}, []string{"gmail"},
			[][2]string{{"gmail", "mine"}}},
		{"conditional gmail mapping leaves the preset", []Mapping{m("mine", "gmail", "custom", "")}, []string{"gmail"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// provision without mappings, then provision the mappings with
			// an observed logger
			h := newTestHandler(t, nil, keyPolicy)
			core, logs := observer.New(zapcore.DebugLevel)
			h.logger = zap.New(core)
			h.Mappings, h.Presets = tc.mappings, tc.presets
			if _, err := newRouter(routerConfig{mappings: h.Mappings, presets: h.Presets, maxBody: h.MaxBody,
				celCostLimit: h.CELCostLimit, base: h.base, forward: h.forward, allowRequestKey: h.AllowRequestSessionKey,
				policy: h.policy, tokens: h.tokens, repl: caddy.NewReplacer(), logger: h.logger,
				transforms: newTransformSet(h.TransformsRoot, h.TransformsDir, 0, 0, &h.held)}); err != nil {
				t.Fatal(err)
			}
			var got [][2]string
			for _, e := range logs.All() {
				if e.Level != zapcore.WarnLevel || e.Message != "mapping can never match: an earlier mapping answers every request it would" {
					t.Errorf("unexpected log %s %q", e.Level, e.Message)
					continue
				}
				f := e.ContextMap()
				got = append(got, [2]string{f["mapping"].(string), f["shadowed_by"].(string)})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warnings %v, want %v", got, tc.want)
			}
		})
	}
}
