package caddyhook

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
)

// TestIntegrationPlaceholders: {http.hooks.route}, .mapping, .status and
// .reason reach log_append (access log fields) and intercept's
// handle_response (a custom answer to refusals), through a real Caddy
// config; no token or payload ends up in them.
func TestIntegrationPlaceholders(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: mappingLines("deploys", `match_expr "payload.ok == true"`, `message_template "deployed"`)})
	site := strings.Replace(in.currentCaddyfile(t), "\thooks {", `	log {
		output file `+in.logPath+`
		format json
	}
	log_append hooks_route {http.hooks.route}
	log_append hooks_mapping {http.hooks.mapping}
	log_append hooks_status {http.hooks.status}
	log_append hooks_reason {http.hooks.reason}
	intercept {
		@refused status 400
		handle_response @refused {
			header -Content-Length
			header X-Hooks-Refusal "{http.hooks.route} {http.hooks.status}"
			respond "refused: {http.hooks.reason}" 422
		}
	}
	hooks {
		`+mappingLines("deploys", `match_expr "payload.ok == true"`, `message_template "deployed"`), 1)
	in.load(site)

	if r := in.post("/hooks/deploys", `{"ok":true,"secret":"PAYLOAD-CANARY-31"}`); r.status != 200 {
		t.Fatalf("mapped hook: %d %s", r.status, r.body)
	}
	r := in.post("/hooks/agent", `{"message":"m","model":"","secret":"PAYLOAD-CANARY-31"}`)
	if r.status != 422 || r.header.Get("X-Hooks-Refusal") != "agent 400" || r.body != "refused: model required" {
		t.Fatalf("intercepted refusal: %d %q %v", r.status, r.body, r.header)
	}
	in.do("POST", "/hooks/wake", `{"text":"x"}`, "Authorization: Bearer "+strings.Repeat("f", 40))

	logs := in.waitLogs(`"hooks_status":"401"`)
	want := map[string]map[string]string{
		"/hooks/deploys": {"hooks_route": "deploys", "hooks_mapping": "deploys", "hooks_status": "200", "hooks_reason": ""},
		"/hooks/agent":   {"hooks_route": "agent", "hooks_mapping": "", "hooks_status": "400", "hooks_reason": "model required"},
		"/hooks/wake":    {"hooks_route": "none", "hooks_mapping": "", "hooks_status": "401", "hooks_reason": "invalid or missing token"},
	}
	seen := 0
	for _, line := range strings.Split(logs, "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "handled request" {
			continue
		}
		uri, _ := entry["request"].(map[string]any)["uri"].(string)
		fields, ok := want[uri]
		if !ok {
			continue
		}
		seen++
		for k, v := range fields {
			if got, _ := entry[k].(string); got != v {
				t.Errorf("%s: access log %s = %q, want %q", uri, k, got, v)
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of %d access entries:\n%s", seen, len(want), logs)
	}
	if strings.Contains(logs, "PAYLOAD-CANARY-31") || strings.Contains(logs, itHookToken) {
		t.Fatal("the log carries payload content or the token")
	}
}

// lockoutRecorder is an events handler module for the tests: it records
// the events it receives (module events.handlers.hooks_test_recorder).
type lockoutRecorder struct{}

// recordedEvents is what every lockoutRecorder received.
var recordedEvents struct {
	sync.Mutex
	events []caddy.Event
}

func init() { caddy.RegisterModule(lockoutRecorder{}) }

func (lockoutRecorder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.hooks_test_recorder", New: func() caddy.Module { return new(lockoutRecorder) }}
}

func (*lockoutRecorder) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	return nil
}

func (*lockoutRecorder) Handle(_ context.Context, e caddy.Event) error {
	recordedEvents.Lock()
	defer recordedEvents.Unlock()
	recordedEvents.events = append(recordedEvents.events, e)
	return nil
}

var _ caddyevents.Handler = (*lockoutRecorder)(nil)

// TestIntegrationLockoutEvent: the lockout of an address emits the
// hooks_lockout event, with the address and the end of the lock, to an
// events subscription of the Caddyfile.
func TestIntegrationLockoutEvent(t *testing.T) {
	recordedEvents.Lock()
	recordedEvents.events = nil
	recordedEvents.Unlock()
	in := startIngress(t, ingressOpts{global: "events {\n\t\ton hooks_lockout hooks_test_recorder\n\t}"})
	bad := "Authorization: Bearer " + strings.Repeat("g", 40)
	before := time.Now()
	for range 20 {
		in.do("POST", "/hooks/wake", `{"text":"x"}`, bad)
	}
	in.do("POST", "/hooks/wake", `{"text":"x"}`, bad) // locked: no second event
	recordedEvents.Lock()
	defer recordedEvents.Unlock()
	if len(recordedEvents.events) != 1 {
		t.Fatalf("%d events, want 1", len(recordedEvents.events))
	}
	e := recordedEvents.events[0]
	if e.Name() != lockoutEventName || e.Origin() == nil || e.Origin().CaddyModule().ID != "http.handlers.hooks" {
		t.Fatalf("event %s from %v", e.Name(), e.Origin())
	}
	until, err := time.Parse(time.RFC3339, e.Data["until"].(string))
	if err != nil {
		t.Fatalf("until %v: %v", e.Data["until"], err)
	}
	if e.Data["address"] != "127.0.0.1" || e.Data["path"] != "/hooks" || e.Data["until_unix"] != until.Unix() ||
		until.Before(before.Add(time.Minute-time.Second).Truncate(time.Second)) || until.After(time.Now().Add(time.Minute)) {
		t.Fatalf("event data %v: want address 127.0.0.1, path /hooks, until about a minute from the first failure", e.Data)
	}
}
