// Package devgw is a small stand-in for an agent gateway's hooks API: it
// speaks the gateway protocol of DESIGN.md over a Unix socket or loopback
// TCP, records what it receives, and appends each main-session event to a
// JSONL file. cmd/devgateway runs it; the integration tests and hookbench
// use it as the gateway.
package devgw

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Received is one request the gateway accepted or refused.
type Received struct {
	Time time.Time `json:"time"`
	// Kind is wake, agent, or hook for any other name (a request forwarded
	// to {prefix}/<name>, which Path names).
	Kind  string `json:"kind"`
	Path  string `json:"path,omitempty"`
	Query string `json:"query,omitempty"`
	// IdempotencyKey is the key as the real gateway reads it: the
	// Idempotency-Key header, else X-OpenClaw-Idempotency-Key, else the
	// body's idempotencyKey (trimmed).
	IdempotencyKey string         `json:"idempotencyKey,omitempty"`
	ForwardedFor   string         `json:"forwardedFor,omitempty"`
	TraceParent    string         `json:"traceparent,omitempty"`
	TraceState     string         `json:"tracestate,omitempty"`
	Body           map[string]any `json:"body"`
	RunID          string         `json:"runId,omitempty"`
	Status         int            `json:"status"`
	// Raw is the body as received, Header the request headers, Host the
	// request's host and Target its request target as sent (tests).
	Raw    []byte      `json:"-"`
	Header http.Header `json:"-"`
	Host   string      `json:"-"`
	Target string      `json:"-"`
}

// KindHook is the Kind of a request to a hook name other than wake and
// agent: a hook the edge forwarded for the gateway's own mappings. The
// stand-in accepts any such name and answers {"ok":true,"runId":…}.
const KindHook = "hook"

// Config tunes a Gateway.
type Config struct {
	Prefix string // default /hooks
	Token  string // when set, requests need Authorization: Bearer <Token>
	// Events, when set, receives one JSON line per accepted event.
	Events io.Writer
	// Quiet suppresses the one-line summaries on Log.
	Log io.Writer
	// Delay is added before every answer (to simulate a slow gateway).
	Delay time.Duration
	// Record keeps every request in memory for Received (tests).
	Record bool
	// Lean answers without decoding bodies into maps or recording them:
	// bodies need only be valid JSON, replies keep their shapes, Count
	// still counts. A cheap, neutral sink for load tests (hookbench).
	Lean bool
}

// Gateway is an http.Handler implementing the gateway protocol.
type Gateway struct {
	cfg    Config
	mu     sync.Mutex
	seen   []Received
	runIDs map[string]string // Idempotency-Key → first runId
	counts map[string]int
	status func(kind string) int
}

// New returns a Gateway for cfg.
func New(cfg Config) *Gateway {
	if cfg.Prefix == "" {
		cfg.Prefix = "/hooks"
	}
	return &Gateway{cfg: cfg, runIDs: make(map[string]string), counts: make(map[string]int)}
}

// FailWith makes the gateway answer every request with the status f
// returns (0 = normal behaviour). For outage tests.
func (g *Gateway) FailWith(f func(kind string) int) {
	g.mu.Lock()
	g.status = f
	g.mu.Unlock()
}

// Received returns a copy of the recorded requests.
func (g *Gateway) Received() []Received {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Received(nil), g.seen...)
}

// Count returns how many requests of kind ("wake", "agent", "" = all) were accepted.
func (g *Gateway) Count(kind string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if kind == "" {
		return g.counts["wake"] + g.counts["agent"] + g.counts[KindHook]
	}
	return g.counts[kind]
}

// DistinctKeys returns the number of distinct Idempotency-Keys accepted.
func (g *Gateway) DistinctKeys() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.runIDs)
}

// ServeHTTP implements the protocol.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Delay > 0 {
		time.Sleep(g.cfg.Delay)
	}
	name, ok := strings.CutPrefix(r.URL.Path, g.cfg.Prefix+"/")
	if !ok || strings.Trim(name, "/") == "" {
		reply(w, http.StatusNotFound, map[string]any{"ok": false, "error": "not found"})
		return
	}
	kind := name
	if kind != "wake" && kind != "agent" {
		kind = KindHook
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, map[string]any{"ok": false, "error": "method not allowed"})
		return
	}
	if g.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+g.cfg.Token)) != 1 {
		reply(w, http.StatusUnauthorized, map[string]any{"ok": false, "error": "unauthorized"})
		return
	}
	if g.cfg.Lean {
		g.serveLean(w, r, kind)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	var body map[string]any
	if err == nil {
		// the real gateway ignores surrounding white space and a byte order mark
		trimmed := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("\uFEFF")))
		if len(trimmed) == 0 {
			body = map[string]any{}
		} else {
			err = json.Unmarshal(trimmed, &body)
		}
	}
	if err != nil || body == nil {
		reply(w, http.StatusBadRequest, map[string]any{"ok": false, "error": "invalid JSON"})
		return
	}
	g.mu.Lock()
	forced := 0
	if g.status != nil {
		forced = g.status(kind)
	}
	g.mu.Unlock()
	if forced != 0 {
		reply(w, forced, map[string]any{"ok": false, "error": fmt.Sprintf("forced status %d", forced)})
		return
	}
	status, resp := g.handle(kind, r, body, raw)
	reply(w, status, resp)
}

// handle validates and records one action.
func (g *Gateway) handle(kind string, r *http.Request, body map[string]any, raw []byte) (int, map[string]any) {
	rec := Received{Time: time.Now(), Kind: kind, Path: strings.TrimPrefix(r.URL.Path, g.cfg.Prefix+"/"),
		Query: r.URL.RawQuery, IdempotencyKey: idempotencyKey(r.Header, body),
		ForwardedFor: r.Header.Get("X-Forwarded-For"), TraceParent: r.Header.Get("Traceparent"),
		TraceState: r.Header.Get("Tracestate"), Body: body}
	if g.cfg.Record {
		rec.Raw, rec.Header, rec.Host, rec.Target = raw, r.Header.Clone(), r.Host, r.RequestURI
	}
	if errMsg := validate(kind, body); errMsg != "" {
		rec.Status = http.StatusBadRequest
		g.record(rec, false)
		return http.StatusBadRequest, map[string]any{"ok": false, "error": errMsg}
	}
	g.mu.Lock()
	if rec.IdempotencyKey != "" {
		if first, dup := g.runIDs[rec.IdempotencyKey]; dup {
			g.mu.Unlock()
			rec.Status, rec.RunID = http.StatusOK, first
			g.record(rec, false)
			return http.StatusOK, replyFor(kind, body, first, true)
		}
	}
	rec.RunID = uuid.NewString()
	if rec.IdempotencyKey != "" {
		g.runIDs[rec.IdempotencyKey] = rec.RunID
	}
	g.counts[kind]++
	g.mu.Unlock()
	rec.Status = http.StatusOK
	g.record(rec, true)
	return http.StatusOK, replyFor(kind, body, rec.RunID, false)
}

// idempotencyKey reads a request's idempotency key as the real gateway
// does: the first of the Idempotency-Key header, the
// X-OpenClaw-Idempotency-Key header and the body's idempotencyKey string
// that is, trimmed, 1 to 256 characters.
func idempotencyKey(h http.Header, body map[string]any) string {
	field, _ := body["idempotencyKey"].(string)
	for _, v := range []string{strings.Join(h.Values("Idempotency-Key"), ", "), strings.Join(h.Values("X-Openclaw-Idempotency-Key"), ", "), field} {
		if v = strings.TrimSpace(v); v != "" && len([]rune(v)) <= 256 {
			return v
		}
	}
	return ""
}

// validate applies the gateway-side checks the real gateway makes.
func validate(kind string, body map[string]any) string {
	switch kind {
	case KindHook:
		return "" // the stand-in has no mappings: any forwarded hook is accepted
	case "wake":
		if s, _ := body["text"].(string); strings.TrimSpace(s) == "" {
			return "text required"
		}
		return ""
	}
	if s, _ := body["message"].(string); strings.TrimSpace(s) == "" {
		return "message required"
	}
	_, hasChannel := body["channel"]
	_, hasTo := body["to"]
	if hasChannel && !hasTo {
		return "channel and to must be set together for hook delivery"
	}
	return ""
}

// replyFor is the gateway's success body.
func replyFor(kind string, body map[string]any, runID string, dup bool) map[string]any {
	if kind == "wake" {
		mode, _ := body["mode"].(string)
		if mode == "" {
			mode = "now"
		}
		outcome := "enqueued"
		if dup {
			outcome = "duplicate"
		}
		return map[string]any{"ok": true, "mode": mode, "eventOutcome": outcome}
	}
	return map[string]any{"ok": true, "runId": runID}
}

// record keeps rec and writes the event line and log summary.
func (g *Gateway) record(rec Received, fresh bool) {
	g.mu.Lock()
	if g.cfg.Record {
		g.seen = append(g.seen, rec)
	}
	g.mu.Unlock()
	if fresh && g.cfg.Events != nil {
		line, _ := json.Marshal(rec)
		g.mu.Lock()
		_, _ = g.cfg.Events.Write(append(line, '\n'))
		g.mu.Unlock()
	}
	if g.cfg.Log != nil {
		fmt.Fprintf(g.cfg.Log, "%s %s status=%d key=%s %s\n", rec.Time.Format(time.RFC3339), rec.Kind, rec.Status, rec.IdempotencyKey, summary(rec))
	}
}

// summary is a one-line description of an action for the console.
func summary(rec Received) string {
	switch rec.Kind {
	case "wake":
		return fmt.Sprintf("text=%q mode=%v", clip(rec.Body["text"]), rec.Body["mode"])
	case KindHook:
		return fmt.Sprintf("path=%s runId=%s (forwarded; the stand-in has no mappings)", rec.Path, rec.RunID)
	}
	return fmt.Sprintf("name=%v agentId=%v sessionKey=%v runId=%s message=%q", rec.Body["name"], rec.Body["agentId"], rec.Body["sessionKey"], rec.RunID, clip(rec.Body["message"]))
}

func clip(v any) string {
	s, _ := v.(string)
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// OpenEvents opens (appending) the JSONL event file.
func OpenEvents(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}
