package caddyhook

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// TestIntegrationGmailPreset posts the Gmail push fixture to a real server
// with `presets gmail`: one agent run per message, wrapped as Email, and
// the fan-out reply.
func TestIntegrationGmailPreset(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: `
		allow_request_session_key
		allowed_session_key_prefixes hook:
		presets gmail`})
	r := in.post("/hooks/gmail", readFixture(t, "gmail-batch.json"))
	if r.status != 200 {
		t.Fatalf("status %d (%s)", r.status, r.body)
	}
	got := sentActions(t, in.gw.Received(), true)
	want := gmailFixtureActions(nil)
	runIDs := matchSent(t, got, want)
	if want := fanoutReply(runIDs, 0); !reflect.DeepEqual(r.json(t), want) {
		t.Fatalf("reply %s, want %v", r.body, want)
	}
	// an empty push dispatches nothing
	if r := in.post("/hooks/gmail", `{"messages":[]}`); r.status != 204 || r.body != "" {
		t.Fatalf("empty push: %d %q, want 204", r.status, r.body)
	}
	if n := len(in.gw.Received()); n != 3 {
		t.Fatalf("gateway received %d actions in all, want 3", n)
	}
}

// TestIntegrationCustomMapping runs a Caddyfile mapping with a CEL match,
// shorthand-style placeholders ({{path}}, {{query.x}}) and a templated
// session key through a real server.
func TestIntegrationCustomMapping(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: `
		agents main ops
		allow_request_session_key
		allowed_session_key_prefixes hook:
		mapping deploys {
			match_path deploy
			match_expr ` + "`" + `payload.status in ["succeeded", "failed"] && headers["x-ci"] == "buildkite"` + "`" + `
			agent_id ops
			name Buildkite
			session_key "hook:deploy:{{pipeline.slug}}"
			message_template "Deploy of {{pipeline.slug}} {{status}} on {{path}} (env {{query.env}}) after {{ cel: int(payload.duration_s / 60.0) }} min\n{{build.url}}"
			deliver false
		}`})
	const body = `{"status":"failed","duration_s":754,"pipeline":{"slug":"api"},"build":{"url":"https://buildkite.com/acme/api/builds/981"},"secret_note":"PAYLOAD-CANARY-71c2"}`
	r := in.post("/hooks/deploy?env=prod", body, "X-CI: buildkite", "Idempotency-Key: bk-981")
	if r.status != 200 {
		t.Fatalf("status %d (%s)", r.status, r.body)
	}
	want := []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"name": "Buildkite", "agentId": "ops", "sessionKey": "hook:deploy:api",
		"deliver": false, "message": "Deploy of api failed on deploy (env prod) after 12 min\nhttps://buildkite.com/acme/api/builds/981"})}
	runIDs := matchSent(t, sentActions(t, in.gw.Received(), true), want)
	if want := map[string]any{"ok": true, "runId": runIDs[0]}; !reflect.DeepEqual(r.json(t), want) {
		t.Fatalf("reply %s, want %v", r.body, want)
	}
	// a replay with the same Idempotency-Key returns the first reply
	// without a second dispatch
	if again := in.post("/hooks/deploy?env=prod", body, "X-CI: buildkite", "Idempotency-Key: bk-981"); again.status != 200 || again.body != r.body {
		t.Fatalf("replay: %d %s, want %s", again.status, again.body, r.body)
	}
	rejected := []struct {
		name   string
		target string
		body   string
		hdr    []string
		status int
		reply  string
	}{
		{"condition false", "/hooks/deploy", `{"status":"running","pipeline":{"slug":"api"}}`, []string{"X-CI: buildkite"}, 404, "Not Found"},
		{"missing header fails the expression", "/hooks/deploy", body, nil, 400, `{"ok":false,"error":"hook mapping failed: deploys"}`},
		{"CEL evaluation error", "/hooks/deploy", `{"status":"failed","duration_s":"soon","pipeline":{"slug":"api"}}`, []string{"X-CI: buildkite"}, 400,
			`{"ok":false,"error":"hook mapping failed: deploys"}`},
		{"other hook name", "/hooks/deployments", body, []string{"X-CI: buildkite"}, 404, "Not Found"},
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			r := in.post(tc.target, tc.body, tc.hdr...)
			if r.status != tc.status || strings.TrimSpace(r.body) != tc.reply {
				t.Fatalf("%d %q, want %d %q", r.status, r.body, tc.status, tc.reply)
			}
		})
	}
	if n := len(in.gw.Received()); n != 1 {
		t.Fatalf("gateway received %d actions in all, want 1", n)
	}
	if logs := in.waitLogs(`"route":"deploys"`); strings.Contains(logs, "PAYLOAD-CANARY-71c2") {
		t.Fatalf("log leaks payload content:\n%s", logs)
	}
}
