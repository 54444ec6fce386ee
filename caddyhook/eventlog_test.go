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
