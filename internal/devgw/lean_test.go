package devgw

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLeanMode(t *testing.T) {
	tests := []struct {
		name, path, auth, body string
		status                 int
		want                   map[string]any // expected reply fields
		counted                string         // kind counted, "" for none
	}{
		{name: "wake", path: "/hooks/wake", auth: "Bearer gw", body: `{"text":"hi","mode":"now"}`, status: 200,
			want: map[string]any{"ok": true, "mode": "now", "eventOutcome": "enqueued"}, counted: "wake"},
		{name: "wake next heartbeat", path: "/hooks/wake", auth: "Bearer gw", body: `{"text":"hi","mode":"next-heartbeat"}`, status: 200,
			want: map[string]any{"ok": true, "mode": "next-heartbeat"}, counted: "wake"},
		{name: "agent", path: "/hooks/agent", auth: "Bearer gw", body: `{"message":"hi"}`, status: 200,
			want: map[string]any{"ok": true}, counted: "agent"},
		{name: "invalid JSON", path: "/hooks/agent", auth: "Bearer gw", body: `{"message":`, status: 400,
			want: map[string]any{"ok": false, "error": "invalid JSON"}},
		{name: "token still checked", path: "/hooks/wake", auth: "Bearer nope", body: `{"text":"hi"}`, status: 401,
			want: map[string]any{"ok": false}},
		{name: "forwarded hook", path: "/hooks/github", auth: "Bearer gw", body: `{"action":"opened"}`, status: 200,
			want: map[string]any{"ok": true}, counted: KindHook},
		{name: "no hook name", path: "/hooks/", auth: "Bearer gw", body: `{}`, status: 404,
			want: map[string]any{"ok": false}},
		{name: "outside the prefix", path: "/other", auth: "Bearer gw", body: `{}`, status: 404,
			want: map[string]any{"ok": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Config{Token: "gw", Lean: true})
			r := httptest.NewRequest(http.MethodPost, tt.path, strings.NewReader(tt.body))
			r.Header.Set("Authorization", tt.auth)
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatalf("reply %q: %v", w.Body, err)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (reply %s)", k, got[k], v, w.Body)
				}
			}
			if tt.name == "agent" || tt.name == "forwarded hook" {
				if id, _ := got["runId"].(string); len(id) != 36 {
					t.Errorf("runId %q is not a UUID", got["runId"])
				}
			}
			if n := g.Count(""); (tt.counted == "") != (n == 0) || tt.counted != "" && g.Count(tt.counted) != 1 {
				t.Errorf("counts: all %d, %s %d", n, tt.counted, g.Count(tt.counted))
			}
			if len(g.Received()) != 0 {
				t.Errorf("lean mode recorded requests")
			}
		})
	}
}
