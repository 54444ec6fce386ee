package devgw

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRecordsForwardedRequests checks what the full mode records of a
// request: the hook name, query, raw body and headers, including for a
// name other than wake and agent (a hook the edge forwarded) and a body
// with a byte order mark, which the real gateway accepts.
func TestRecordsForwardedRequests(t *testing.T) {
	for _, tc := range []struct {
		name, target, body string
		status             int
		kind, path, query  string
		field              string // a body field that must be decoded
	}{
		{"forwarded hook", "/hooks/github?event=push", `{"action":"opened"}`, 200, KindHook, "github", "event=push", "action"},
		{"nested hook path", "/hooks/ci/jenkins", `{"build":1}`, 200, KindHook, "ci/jenkins", "", "build"},
		{"wake with byte order mark", "/hooks/wake", "\uFEFF {\"text\":\"hi\"}\n", 200, "wake", "wake", "", "text"},
		{"empty body is {}", "/hooks/agent", "", 400, "agent", "agent", "", ""},
		{"invalid JSON", "/hooks/github", `{"a":`, 400, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Config{Token: "gw", Record: true})
			r := httptest.NewRequest(http.MethodPost, tc.target, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer gw")
			r.Header.Set("X-GitHub-Event", "push")
			r.Header.Set("Idempotency-Key", "k1")
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			var reply map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
				t.Fatalf("reply %q: %v", w.Body, err)
			}
			got := g.Received()
			if tc.kind == "" {
				if len(got) != 0 {
					t.Fatalf("recorded an undecodable request: %+v", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("recorded %d requests", len(got))
			}
			rec := got[0]
			if rec.Kind != tc.kind || rec.Path != tc.path || rec.Query != tc.query || string(rec.Raw) != tc.body ||
				rec.IdempotencyKey != "k1" || rec.Header.Get("X-Github-Event") != "push" {
				t.Fatalf("recorded %+v", rec)
			}
			if _, ok := rec.Body[tc.field]; tc.field != "" && !ok {
				t.Fatalf("body %v lacks %q", rec.Body, tc.field)
			}
			if tc.status == 200 && tc.kind == KindHook && reply["runId"] == nil {
				t.Fatalf("reply %v has no runId", reply)
			}
		})
	}
}
