package caddyhook

import (
	"net/http"
	"reflect"
	"regexp"
	"testing"
)

// TestMappingSessionKeyProvision checks the provision-time session key
// rules: a templated key is request-supplied (it needs
// allow_request_session_key and allowed_session_key_prefixes), a static
// key is operator-set but must fit the prefixes.
func TestMappingSessionKeyProvision(t *testing.T) {
	keyed := func(key string) Mapping {
		return Mapping{ID: "keyed", MatchPath: "k", MessageTemplate: "m", SessionKey: key}
	}
	allow := func(h *Handler) { h.AllowRequestSessionKey = true }
	prefixes := func(h *Handler) { h.AllowedSessionKeyPrefixes = []string{"hook:", "ops:"} }
	both := func(h *Handler) { allow(h); prefixes(h) }
	tests := []struct {
		name    string
		mod     func(h *Handler)
		mapping Mapping
		presets []string
		want    string // "" = provisions
	}{
		{"static key, no policy", nil, keyed("team:alerts"), nil, ""},
		{"static key without allow_request_session_key", prefixes, keyed("ops:alerts"), nil, ""},
		{"static key matching a prefix in another case", prefixes, keyed("HOOK:Alerts"), nil, ""},
		{"static key outside the prefixes", prefixes, keyed("team:alerts"), nil,
			`mapping keyed: session_key: "team:alerts" does not start with one of allowed_session_key_prefixes`},
		{"templated key, no prefixes", allow, keyed("hook:{{id}}"), nil,
			"mapping keyed: session_key: a templated session key needs allowed_session_key_prefixes"},
		{"templated key, no policy at all", nil, keyed("hook:{{id}}"), nil,
			"mapping keyed: session_key: a templated session key needs allowed_session_key_prefixes"},
		{"templated key without allow_request_session_key", prefixes, keyed("hook:{{id}}"), nil,
			"mapping keyed: session_key: a templated session key counts as request-supplied; set allow_request_session_key"},
		{"CEL key is templated too", prefixes, keyed("hook:{{ cel: path }}"), nil,
			"mapping keyed: session_key: a templated session key counts as request-supplied; set allow_request_session_key"},
		{"templated key with the policy", both, keyed("hook:{{id}}"), nil, ""},
		{"gmail preset without prefixes", allow, Mapping{ID: "x", MatchPath: "x", MessageTemplate: "m"}, []string{"gmail"},
			"mapping gmail: session_key: a templated session key needs allowed_session_key_prefixes"},
		{"gmail preset without allow_request_session_key", prefixes, Mapping{ID: "x", MatchPath: "x", MessageTemplate: "m"}, []string{"gmail"},
			"mapping gmail: session_key: a templated session key counts as request-supplied; set allow_request_session_key"},
		{"gmail preset with the policy", both, Mapping{ID: "x", MatchPath: "x", MessageTemplate: "m"}, []string{"gmail"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := provisionError(t, func(h *Handler) {
				if tc.mod != nil {
					tc.mod(h)
				}
				h.Presets = tc.presets
			}, tc.mapping)
			if got != tc.want {
				t.Fatalf("Provision error %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMappingSessionKeyRequests checks the session key a mapped action
// carries: a static key is sent even where request keys are disabled, a
// templated one is policed like a request key, one that renders empty is
// refused, and without a key the default applies.
func TestMappingSessionKeyRequests(t *testing.T) {
	agent := func(id, key string) Mapping {
		return Mapping{ID: id, MatchPath: id, MessageTemplate: "event {{n}}", SessionKey: key, AllowUnsafeExternalContent: true}
	}
	// the templated mappings provision only with allow_request_session_key
	ms := []Mapping{agent("static", "Hook:Static"), agent("none", ""), agent("templated", "hook:{{team}}:{{n}}"),
		agent("escape", "{{team}}:{{n}}"), agent("blank", "  {{team}}  ")}
	tests := []struct {
		name     string
		allowReq bool // allow_request_session_key
		path     string
		body     string
		status   int
		wantKey  string // the session key sent, or the error reason for a 400
	}{
		{"static key, request keys disabled", false, "static", `{"n":1}`, 200, "Hook:Static"},
		{"static key, request keys enabled", true, "static", `{"n":1}`, 200, "Hook:Static"},
		{"no key: default", false, "none", `{"n":1}`, 200, "hook:default"},
		{"templated key", true, "templated", `{"team":"ops","n":2}`, 200, "hook:ops:2"},
		{"templated key rendering a prefix-less key", true, "escape", `{"team":"hook","n":3}`, 200, "hook:3"},
		{"templated key outside the prefixes", true, "escape", `{"team":"main","n":3}`, 400, "sessionKey must start with one of: hook:"},
		{"templated key rendering empty", true, "blank", `{"n":4}`, 400, "hook mapping blank: sessionKey template rendered empty"},
		{"templated key rendering blank", true, "blank", `{"team":"  ","n":4}`, 400, "hook mapping blank: sessionKey template rendered empty"},
	}
	handlers := map[bool]*Handler{}
	gateways := map[bool]*testGateway{}
	for _, allowReq := range []bool{false, true} {
		mappings := ms[:2]
		if allowReq {
			mappings = ms
		}
		handlers[allowReq], gateways[allowReq] = mappedHandler(t, func(h *Handler) {
			h.AllowRequestSessionKey = allowReq
			h.AllowedSessionKeyPrefixes = []string{"hook:"}
			h.DefaultSessionKey = "hook:default"
		}, mappings...)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, gw := handlers[tc.allowReq], gateways[tc.allowReq]
			before := len(gw.Received())
			w := postHook(t, h, tc.path, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			got := gw.Received()[before:]
			if tc.status != http.StatusOK {
				if len(got) != 0 {
					t.Fatalf("a refused request reached the gateway")
				}
				if want := map[string]any{"ok": false, "error": tc.wantKey}; !reflect.DeepEqual(decodeReply(t, w.Body.Bytes()), want) {
					t.Fatalf("reply %s, want %v", w.Body, want)
				}
				return
			}
			if len(got) != 1 || got[0].Body["sessionKey"] != tc.wantKey {
				t.Fatalf("gateway received %v, want sessionKey %q", got, tc.wantKey)
			}
		})
	}
}

// TestMappingSessionKeyGenerated checks that without any key a fresh
// hook:<uuid> is generated per action, also within a fan-out.
func TestMappingSessionKeyGenerated(t *testing.T) {
	h, gw := mappedHandler(t, nil, Mapping{ID: "each", MatchPath: "each", ForEach: "xs", MessageTemplate: "x {{xs[0]}}"})
	if w := postHook(t, h, "each", `{"xs":[1,2]}`); w.Code != http.StatusOK {
		t.Fatalf("status %d (%s)", w.Code, w.Body)
	}
	generated := regexp.MustCompile(`\Ahook:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\z`)
	got := gw.Received()
	if len(got) != 2 {
		t.Fatalf("gateway received %d actions, want 2", len(got))
	}
	k0, _ := got[0].Body["sessionKey"].(string)
	k1, _ := got[1].Body["sessionKey"].(string)
	if !generated.MatchString(k0) || !generated.MatchString(k1) || k0 == k1 {
		t.Fatalf("session keys %q, %q: want two distinct hook:<uuid>", k0, k1)
	}
}
