package caddyhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// benchWriter is a reusable ResponseWriter, so that allocations counted
// are the handler's own.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(status int)      { w.status = status }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// benchBody is a request body that can be rewound.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchRequest returns a reusable request for target with body.
func benchRequest(target string, body []byte, hdr ...string) (*http.Request, *benchBody) {
	rb := &benchBody{}
	rb.Reset(body)
	r := httptest.NewRequest(http.MethodPost, target, nil)
	r.Body = rb
	r.ContentLength = int64(len(body))
	r.RemoteAddr = "192.0.2.10:40000"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r, rb
}

// runHandlerBench serves r b.N times and checks every answer is want.
func runHandlerBench(b *testing.B, h *Handler, r *http.Request, body []byte, rb *benchBody, want int, vary func(i int, r *http.Request)) {
	b.Helper()
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		rb.Reset(body)
		w.reset()
		if vary != nil {
			vary(i, r)
		}
		if err := h.ServeHTTP(w, r, passThrough); err != nil {
			b.Fatal(err)
		}
		if w.status != want {
			b.Fatalf("request %d: status %d, want %d", i, w.status, want)
		}
		i++
	}
}

// BenchmarkWakePath is an accepted wake through the whole handler and the
// gateway client to a devgw gateway on a Unix socket (in this process).
func BenchmarkWakePath(b *testing.B) {
	gw := startTestGateway(b, devgw.Config{})
	h := newTestHandler(b, gw, nil)
	body := []byte(`{"text":"New deployment finished on prod-eu-1","mode":"now"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
}

// BenchmarkForwardWakePath is BenchmarkWakePath in forward mode: the
// wake is validated and then forwarded as sent.
func BenchmarkForwardWakePath(b *testing.B) {
	gw := startTestGateway(b, devgw.Config{})
	h := newTestHandler(b, gw, func(h *Handler) { h.Mode = modeForward })
	body := []byte(`{"text":"New deployment finished on prod-eu-1","mode":"now"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
}

// BenchmarkAgentPath is an accepted agent action with every policy rule
// on: agent list and allowlist, request session keys with prefixes,
// models, channels, and the external-content wrapper.
func BenchmarkAgentPath(b *testing.B) {
	gw := startTestGateway(b, devgw.Config{})
	h := newTestHandler(b, gw, func(h *Handler) {
		h.Agents = []string{"main", "ops"}
		h.AllowedAgentIDs = &[]string{"main", "ops"}
		h.AllowRequestSessionKey = true
		h.AllowedSessionKeyPrefixes = []string{"hook:"}
		h.AllowedModels = []string{"openai/gpt-5", "anthropic/claude"}
	})
	body := []byte(`{"message":"Build 1234 failed on main: TestCheckout timed out after 30s. Please investigate.",` +
		`"name":"CI","agentId":"ops","sessionKey":"hook:ci:main","wakeMode":"now","deliver":true,` +
		`"channel":"slack","to":"C0123","model":"openai/gpt-5","thinking":"low","timeoutSeconds":120}`)
	r, rb := benchRequest("/hooks/agent", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
}

// BenchmarkUnauthorized is a wrong token from many addresses (each stays
// below the lockout threshold): the cost of a spread guessing attack.
func BenchmarkUnauthorized(b *testing.B) {
	h := newTestHandler(b, nil, nil)
	addrs := make([]string, 1<<18)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String() + ":40000"
	}
	body := []byte(`{"text":"x"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer not-the-token-not-the-token-not-the-token", "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusUnauthorized, func(i int, r *http.Request) {
		r.RemoteAddr = addrs[i%len(addrs)]
	})
}

// BenchmarkLocked is a request from a locked-out address: answered 429
// before the token is even compared.
func BenchmarkLocked(b *testing.B) {
	h := newTestHandler(b, nil, nil)
	body := []byte(`{"text":"x"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	for i := range h.AuthFailures.Count {
		w := serve(b, h, hookRequest{target: "/hooks/wake", remote: "192.0.2.10", header: jsonCT})
		if w.Code != http.StatusUnauthorized {
			b.Fatalf("failure %d: %d", i, w.Code)
		}
	}
	runHandlerBench(b, h, r, body, rb, http.StatusTooManyRequests, nil)
}

// nopSink answers every delivery like a gateway would, without I/O.
type nopSink struct{}

func (nopSink) deliver(_ context.Context, items []prepared, _ int, _ netip.Addr) (int, []byte, *hookError) {
	return http.StatusOK, []byte(`{"ok":true,"mode":"now"}`), nil
}

// BenchmarkHandlerOwnWake is an accepted wake through ServeHTTP with the
// gateway replaced by nopSink: the handler's own cost per request.
func BenchmarkHandlerOwnWake(b *testing.B) {
	h := newTestHandler(b, nil, nil)
	h.sink = nopSink{}
	body := []byte(`{"text":"Deploy finished: build 1234 is green","mode":"now"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
}

// BenchmarkDecodePayload decodes the wake and agent bodies of hookbench.
func BenchmarkDecodePayload(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"wake", `{"text":"Deploy finished: build 1234 is green","mode":"now"}`},
		{"agent", `{"message":"Deploy finished: build 1234 is green. Summarise the changes for the team.",` +
			`"name":"CI","agentId":"ops","sessionKey":"hook:ci:main","model":"fast-model","deliver":false}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ex := exchange{body: []byte(bc.body)}
				if herr := decodePayload(&ex, false); herr != nil {
					b.Fatal(herr)
				}
			}
		})
	}
}
