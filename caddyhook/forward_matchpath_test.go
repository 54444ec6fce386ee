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
	rec := recordTargets(t)
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway, h.Mode = "unix/"+rec.sock, modeForward
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
	if got, want := rec.take(), []string{"/hooks/caf%C3%A9", "/hooks/a%20b"}; !slices.Equal(got, want) {
		t.Errorf("forwarded to %q, want %q", got, want)
	}
}

// TestForwardGatewayNames: in forward mode the edge routes the name the
// gateway's URL parser reads (D25-D27 of issue 35): a raw fragment is no
// part of the name (/hooks/wake#frag is /wake), a backslash is a slash,
// and a forward mapping's match_path is compared as the gateway compares
// its match.path (a%2Fb answers /hooks/a%2Fb, not /hooks/a/b; a|b is not
// escaped). Each request reaches the gateway under the path the gateway
// reads.
func TestForwardGatewayNames(t *testing.T) {
	rec := recordTargets(t)
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Gateway, h.Mode = "unix/"+rec.sock, modeForward
		h.Mappings = []Mapping{{ID: "slash", MatchPath: "a%2Fb", Forward: true}, {ID: "bar", MatchPath: "a|b", Forward: true},
			{ID: "nested", MatchPath: "x/y", Forward: true}}
	})
	for _, tc := range []struct {
		target, body string
		status       int
		path         string // forwarded as
	}{
		{"/hooks/wake#frag", `{"text":"t"}`, 200, "/hooks/wake"},
		{"/hooks/agent#x?y=1", `{"message":"m"}`, 200, "/hooks/agent"},
		{`/hooks\wake`, `{"text":"t"}`, 200, "/hooks/wake"},
		{`/hooks/x\y`, `{}`, 200, "/hooks/x/y"},
		{"/hooks/a%2Fb", `{}`, 200, "/hooks/a%2Fb"},
		{"/hooks/a/b", `{}`, 404, ""},
		{"/hooks/a|b", `{}`, 200, "/hooks/a|b"},
		{"/hooks/nothing#wake", `{}`, 404, ""},
	} {
		w := serve(t, h, hookRequest{target: tc.target, body: tc.body, header: headers(auth, jsonCT)})
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.target, w.Code, w.Body, tc.status)
		}
		if paths := rec.take(); tc.path != "" && (len(paths) != 1 || paths[0] != tc.path) {
			t.Errorf("%s: forwarded to %q, want %q", tc.target, paths, tc.path)
		}
	}
}

// targetRecorder is a stub gateway that records the request target of
// every request it answers (200 with a runId).
type targetRecorder struct {
	sock string
	mu   sync.Mutex
	uris []string
}

// recordTargets starts a targetRecorder.
func recordTargets(t *testing.T) *targetRecorder {
	rec := &targetRecorder{}
	rec.sock = startStubGateway(t, func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.uris = append(rec.uris, r.RequestURI)
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"runId":"r"}`))
	})
	return rec
}

// take returns the targets recorded since the last take.
func (rec *targetRecorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.uris
	rec.uris = nil
	return out
}
