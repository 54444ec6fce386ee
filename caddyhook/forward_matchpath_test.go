package caddyhook

import (
	"net/http"
	"slices"
	"sync"
	"testing"
)

// TestForwardNonASCIIMatchPath: a forward mapping's match_path is the
// decoded hook name (café answers /hooks/caf%C3%A9), and the request
// reaches the gateway under the same escaped path, where the gateway's
// match.path "caf%C3%A9" takes it. Other escapes of the same name
// (caf%c3%a9) are another name to the gateway, which compares match.path
// with the path as sent: not this mapping's, at the edge either. (Until
// issue 26 item 4 the edge refused to load such a mapping.)
func TestForwardNonASCIIMatchPath(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	sock := startStubGateway(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"runId":"r"}`))
	})
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway, h.Mode = "unix/"+sock, modeForward
		h.Mappings = []Mapping{{ID: "cafe", MatchPath: "café", Forward: true}, {ID: "space", MatchPath: "a b", Forward: true}}
	})
	for _, tc := range []struct {
		target string
		status int
	}{
		{"/hooks/caf%C3%A9", 200},
		{"/hooks/caf%c3%a9", 404}, // another name to the gateway (its match.path is caf%C3%A9)
		{"/hooks/a%20b", 200},
		{"/hooks/cafe", 404},
		{"/hooks/caf%C3%A9x", 404},
	} {
		w := serve(t, h, hookRequest{target: tc.target, body: `{}`, header: headers(auth, jsonCT)})
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.target, w.Code, w.Body, tc.status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/hooks/caf%C3%A9", "/hooks/a%20b"}; !slices.Equal(paths, want) {
		t.Errorf("forwarded to %q, want %q", paths, want)
	}
}
