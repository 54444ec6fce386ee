package caddyhook

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// TestEventsConfigErrors: an events setting that cannot work is refused at
// provision, naming the option; no credential or signature header may
// join the allow-list of recorded values.
func TestEventsConfigErrors(t *testing.T) {
	signed := Mapping{ID: "gh", MatchPath: "github", MessageTemplate: "push", Verify: &verify.Config{Scheme: "github", Secrets: []string{"0123456789abcdef0123"}}}
	for _, tc := range []struct {
		name   string
		events EventsConfig
		mod    func(h *Handler)
		want   string
	}{
		{"max_events", EventsConfig{MaxEvents: -1}, nil, "events: max_events"},
		{"max_bytes", EventsConfig{MaxBytes: 1000}, nil, "events: max_bytes 1000 must be at least 64KiB"},
		{"retain", EventsConfig{Retain: caddy.Duration(time.Millisecond)}, nil, "events: retain"},
		{"max_rejections", EventsConfig{MaxRejections: -5}, nil, "events: max_rejections"},
		{"max_body", EventsConfig{MaxBody: 64 << 20}, nil, "events: max_body"},
		{"max_body over a quarter", EventsConfig{MaxBytes: 1 << 20, MaxBody: 512 << 10}, nil, "a quarter of max_bytes"},
		{"authorization", EventsConfig{Headers: []string{"authorization"}}, nil, "Authorization carries a credential"},
		{"x-service-token", EventsConfig{Headers: []string{"X-Service-Token"}}, nil, "carries a credential"},
		{"token alias", EventsConfig{Headers: []string{"x-my-token"}}, func(h *Handler) { h.TokenHeaders = []string{"X-My-Token"} }, "carries a credential"},
		{"signature", EventsConfig{Headers: []string{"x-hub-signature-256"}}, func(h *Handler) { h.Mappings = []Mapping{signed} }, "carries a credential or a signature"},
		{"not a name", EventsConfig{Headers: []string{"a b"}}, nil, "is not a header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			ev := tc.events
			h.Events = &ev
			if tc.mod != nil {
				tc.mod(h)
			}
			err := provision(t, h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	h := validHandler()
	h.Events = &EventsConfig{Headers: []string{"x-shopify-topic"}, Bodies: true}
	if err := provision(t, h); err != nil || !h.events.allow["X-Shopify-Topic"] || !h.events.bodies {
		t.Fatalf("a valid events block: %v", err)
	}
}

// TestKeptKeySource: who chose a kept request's session key, for a replay
// (issue 34 B14): as recorded; for an event kept before key_source was
// recorded, none for the key today's policy assigns itself (its default
// key, or hook:<uuid> when it generates keys), else the request's.
func TestKeptKeySource(t *testing.T) {
	generating, err := newPolicy(policyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	withDefault, err := newPolicy(policyConfig{DefaultSessionKey: "hook:main"})
	if err != nil {
		t.Fatal(err)
	}
	const uuidKey = "hook:0c4841af-6b8e-4f4a-9c1d-2e3f4a5b6c7d"
	for _, c := range []struct {
		name   string
		p      *policy
		source string // the kept key_source
		key    string
		want   keySource
	}{
		{"recorded: none", generating, "none", "hook:anything", keyNone},
		{"recorded: operator", generating, "operator", "hook:static", keyOperator},
		{"recorded: request", generating, "request", uuidKey, keyRequest},
		{"old, generated", generating, "", uuidKey, keyNone},
		{"old, no key", generating, "", "", keyNone},
		{"old, another key", generating, "", "hook:chosen", keyRequest},
		{"old, today's default", withDefault, "", "hook:main", keyNone},
		{"old, generated, but a default now", withDefault, "", uuidKey, keyRequest},
		{"unknown source", generating, "someone", uuidKey, keyRequest},
	} {
		rec := &eventRecorder{policy: c.p}
		if got := rec.keptKeySource(&replayItem{KeySource: c.source}, c.key); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
