package caddyhook

import (
	"net/http"
	"testing"

	"github.com/caddyhook/caddyhook/internal/boundary"
	"github.com/caddyhook/caddyhook/internal/devgw"
)

// The mapped-versus-agent benchmarks send the same agent action two ways:
// a custom hook whose mapping builds it with three templates after a CEL
// match, and the plain /agent endpoint given the built action.
var (
	benchMappedBody = []byte(`{"event":"build","pipeline":"api","build":{"number":1234,"branch":"main","state":"failed",` +
		`"message":"TestCheckout timed out after 30s","url":"https://ci.example.com/api/builds/1234","duration":312.5,` +
		`"author":{"name":"Mona","email":"mona@example.com"}}}`)
	benchAgentBody = []byte(`{"message":"Build 1234 failed on main: TestCheckout timed out after 30s. Please investigate.",` +
		`"name":"CI api","sessionKey":"hook:ci:api"}`)
)

// benchBuildMapping is the mapping of the mapped benchmark: one CEL match
// and three templates (name, session key, message).
func benchBuildMapping() Mapping {
	return Mapping{
		ID: "ci", MatchPath: "ci",
		MatchExpr:       `payload.event == "build" && payload.build.state == "failed"`,
		Name:            "CI {{pipeline}}",
		SessionKey:      "hook:ci:{{pipeline}}",
		MessageTemplate: "Build {{build.number}} failed on {{build.branch}}: {{build.message}}. Please investigate.",
	}
}

// benchMappedHandler provisions the benchmark handler in front of gw (nil:
// nopSink, the handler's own cost only).
func benchMappedHandler(tb testing.TB, gw *testGateway) *Handler {
	tb.Helper()
	h := newTestHandler(tb, gw, func(h *Handler) {
		keyPolicy(h)
		h.Mappings = []Mapping{benchBuildMapping()}
	})
	if gw == nil {
		h.sink = nopSink{}
	}
	return h
}

// TestMappedVsAgentBenchParity checks that both benchmarked requests make
// the gateway receive the same action, so the benchmark compares like
// with like.
func TestMappedVsAgentBenchParity(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := benchMappedHandler(t, gw)
	for _, rq := range []struct{ target, body string }{{"/hooks/ci", string(benchMappedBody)}, {"/hooks/agent", string(benchAgentBody)}} {
		if w := serve(t, h, hookRequest{target: rq.target, body: rq.body, header: headers(auth, jsonCT)}); w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", rq.target, w.Code, w.Body)
		}
	}
	got := sentActions(t, gw.Received(), true)
	if len(got) != 2 || got[0].canonical() != got[1].canonical() {
		t.Fatalf("mapped and plain requests differ:\n%s", describeSent(got))
	}
	want := agentSent(boundary.SourceWebhook, map[string]any{"name": "CI api", "sessionKey": "hook:ci:api",
		"message": "Build 1234 failed on main: TestCheckout timed out after 30s. Please investigate."})
	matchSent(t, got[:1], []sentAction{want})
}

// BenchmarkMappedVsAgent runs the mapped hook and the equivalent /agent
// request in one run: through the gateway client to a devgw on a Unix
// socket ("gateway/…", where the 2× budget applies), and with the gateway
// replaced by nopSink ("own/…", the handler's own work).
func BenchmarkMappedVsAgent(b *testing.B) {
	for _, sink := range []string{"gateway", "own"} {
		for _, bc := range []struct {
			name, target string
			body         []byte
		}{{"agent", "/hooks/agent", benchAgentBody}, {"mapped", "/hooks/ci", benchMappedBody}} {
			b.Run(sink+"/"+bc.name, func(b *testing.B) {
				var gw *testGateway
				if sink == "gateway" {
					gw = startTestGateway(b, devgw.Config{})
				}
				h := benchMappedHandler(b, gw)
				r, rb := benchRequest(bc.target, bc.body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json",
					"User-Agent", "Buildkite-Request/1.0", "X-Request-Id", "3f2a9c4e-1b7d-4e8a-9c0f-5d6e7a8b9c0d",
					"Accept-Encoding", "gzip", "X-Forwarded-Proto", "https")
				runHandlerBench(b, h, r, bc.body, rb, http.StatusOK, nil)
			})
		}
	}
}
