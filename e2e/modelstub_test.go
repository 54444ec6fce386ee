//go:build openclaw

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowMarker in a prompt makes the model stub answer only after
// slowModelDelay, so that a run's timeoutSeconds shows in its outcome.
const (
	slowMarker     = "SLOW-MODEL"
	slowModelDelay = 8 * time.Second
)

// modelCall is one chat completion the gateway asked the stub for.
type modelCall struct {
	Model           string
	ReasoningEffort string
	User            []string // the text of each user message, in order
}

// text is every user message joined, for searching.
func (c modelCall) text() string { return strings.Join(c.User, "\n") }

// modelStub is a tiny OpenAI-compatible model provider on loopback: it
// lists two models, answers every chat completion with "OK" (streamed
// when asked) and records what the agent was given.
type modelStub struct {
	ln  net.Listener
	srv *http.Server

	mu    sync.Mutex
	calls []modelCall
}

// newModelStub listens on 127.0.0.1:0; it is closed in t.Cleanup.
func newModelStub(t testing.TB) *modelStub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &modelStub{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// baseURL is what the gateway's models.providers.<id>.baseUrl must be.
func (s *modelStub) baseURL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// models lists the stub's models.
func (s *modelStub) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m1","object":"model"},{"id":"m2","object":"model"}]}`)
}

// complete records one chat completion and answers "OK".
func (s *modelStub) complete(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model           string `json:"model"`
		Stream          bool   `json:"stream"`
		ReasoningEffort string `json:"reasoning_effort"`
		Messages        []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := modelCall{Model: req.Model, ReasoningEffort: req.ReasoningEffort}
	for _, m := range req.Messages {
		if m.Role == "user" {
			call.User = append(call.User, messageText(m.Content))
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if strings.Contains(call.text(), slowMarker) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(slowModelDelay):
		}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"stub","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"OK"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, req.Model)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"stub\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"OK\"},\"finish_reason\":null}]}\n\n", req.Model)
	fmt.Fprintf(w, "data: {\"id\":\"stub\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n", req.Model)
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// messageText flattens a message content (a string or a list of parts).
func messageText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// snapshot returns the calls recorded so far.
func (s *modelStub) snapshot() []modelCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]modelCall(nil), s.calls...)
}
