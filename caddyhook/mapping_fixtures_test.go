package caddyhook

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// payloadsDir holds the sample payloads and their mappings.
const payloadsDir = "../testdata/payloads"

// Provider secrets the fixture mappings read from the environment.
const (
	fixtureGitHubSecret = "fixture-github-secret-5e1c9a7b3d2f"
	fixtureStripeSecret = "whsec_fixtureStripe2b4d6f8a1c3e5g"
)

// fixturePolicy is the routing policy of Caddyfile.example that the
// mapping snippet is written for.
const fixturePolicy = `
		agents main ops
		allowed_agent_ids main ops
		default_session_key hook:ingress
		allow_request_session_key
		allowed_session_key_prefixes hook:
		channels last slack telegram
		presets gmail
`

// readFixture returns a file of testdata/payloads.
func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(payloadsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// githubSigned signs body for the fixture GitHub secret as delivery of
// event.
func githubSigned(event, delivery string) func(body string) []string {
	return func(body string) []string {
		return []string{"X-Hub-Signature-256: sha256=" + hex.EncodeToString(macOf(sha256.New, []byte(fixtureGitHubSecret), body)),
			"X-GitHub-Event: " + event, "X-GitHub-Delivery: " + delivery}
	}
}

// gmailFixtureActions are the actions the gmail preset makes of
// gmail-batch.json, each body with the extra fields given.
func gmailFixtureActions(extra map[string]any) []sentAction {
	messages := []struct{ id, message string }{
		{"18f2c4a9b7e3d001", "New email from Alice Martin <alice@example.org>\nSubject: Quarterly invoice #2026-114\n" +
			"Hi, please find attached the invoice for Q3. Payment is due within 30 days.\n" +
			"Hi,\n\nplease find attached the invoice for Q3 (EUR 4,200.00). Payment is due within 30 days.\n\nBest regards,\nAlice"},
		{"18f2c4b1c2d4e002", "New email from GitHub <noreply@github.com>\nSubject: [octo-org/api] Run failed: CI - main (a1b2c3d)\n" +
			"Run failed for main (a1b2c3d). Jobs: test (ubuntu-latest) failed after 4m12s."},
		{"18f2c4c7d9f1a003", "New email from Bob Chen <bob@example.net>\nSubject: Re: server migration on Saturday\n" +
			"Works for me. I will be online from 08:00 UTC & keep an eye on the \"db-2\" replica.\n" +
			"Works for me. I will be online from 08:00 UTC & keep an eye on the \"db-2\" replica.\n\n> Can we move the migration to Saturday?"},
	}
	out := make([]sentAction, len(messages))
	for i, m := range messages {
		body := map[string]any{"name": "Gmail", "wakeMode": "now", "sessionKey": "hook:gmail:" + m.id, "message": m.message}
		for k, v := range extra {
			body[k] = v
		}
		out[i] = agentSent(boundary.SourceEmail, body)
	}
	return out
}

// TestFixtureMappings posts every sample payload of testdata/payloads to a
// real server configured with testdata/payloads/mappings.caddy and the
// gmail preset, and checks the exact actions the gateway received and
// the reply.
func TestFixtureMappings(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", fixtureGitHubSecret)
	t.Setenv("STRIPE_WEBHOOK_SECRET", fixtureStripeSecret)
	in := startIngress(t, ingressOpts{hooks: fixturePolicy + readFixture(t, "mappings.caddy")})
	token := "Authorization: Bearer " + itHookToken

	tests := []struct {
		name   string
		path   string
		file   string
		header func(body string) []string
		status int
		want   []sentAction
		// reply builds the exact reply from the runIds the gateway
		// assigned, in action order.
		reply func(runIDs []string) map[string]any
	}{
		{
			name: "gmail batch", path: "gmail", file: "gmail-batch.json", status: 200,
			header: func(string) []string { return []string{token} },
			want:   gmailFixtureActions(map[string]any{"agentId": "main"}),
			reply:  func(ids []string) map[string]any { return fanoutReply(ids, 0) },
		},
		{
			name: "github pull_request", path: "github", file: "github-pull_request.json", status: 200,
			header: githubSigned("pull_request", "0b9a3c10-c6a1-11f0-8e0a-6a1b2c3d4e5f"),
			want: []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"name": "GitHub", "agentId": "main",
				"sessionKey": "hook:github:octo-org/api#42",
				"message": "PR #42 opened in octo-org/api by mona: Retry gateway dispatch with backoff\n" +
					"retry-backoff -> main, 3 commits, +148/-21\nhttps://github.com/octo-org/api/pull/42\n\n" +
					"Dispatch now retries 502/503 answers with exponential backoff.\n\nCloses #37."})},
			reply: func(ids []string) map[string]any { return map[string]any{"ok": true, "runId": ids[0]} },
		},
		{
			name: "github push", path: "github", file: "github-push.json", status: 200,
			header: githubSigned("push", "1c8b4d21-c6a1-11f0-9b1f-7b2c3d4e5f60"),
			want: []sentAction{wakeSent("GitHub: mona pushed 2 commit(s) to octo-org/api (main): Release v1.8.0\n"+
				"https://github.com/octo-org/api/compare/9049f1265b7d...0d1a26e67d8f", "now")},
			reply: func([]string) map[string]any {
				return map[string]any{"ok": true, "mode": "now", "eventOutcome": "enqueued"}
			},
		},
		{
			name: "github issues", path: "github", file: "github-issues.json", status: 200,
			header: githubSigned("issues", "2d7c5e32-c6a1-11f0-8c2e-8c3d4e5f6071"),
			want: []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"name": "GitHub", "agentId": "main",
				"sessionKey": "hook:github:issue:octo-org/api#57",
				"message": "Issue #57 opened in octo-org/api by hubot: 503 from /v1/orders under load\nLabels: bug, p1\n" +
					"https://github.com/octo-org/api/issues/57\n\n" +
					"Since 09:40 UTC about 2% of POST /v1/orders return 503.\nSteps: run the k6 smoke test against staging."})},
			reply: func(ids []string) map[string]any { return map[string]any{"ok": true, "runId": ids[0]} },
		},
		{
			name: "stripe invoice.payment_failed", path: "stripe", file: "stripe-invoice.payment_failed.json", status: 200,
			header: func(body string) []string { return stripeHeaders(fixtureStripeSecret, body, time.Now()) },
			want: []sentAction{agentSent(boundary.SourceWebhook, map[string]any{"name": "Stripe", "agentId": "ops",
				"sessionKey": "hook:stripe:cus_R4nq8sTyUe2VbX",
				"message": "Stripe: payment failed for invoice A1B2C3D4-0007 of Customer Ltd <billing@customer.example>: " +
					"49.00 EUR due, attempt 2, next retry 2026-11-25T10:02:02.000Z\n" +
					"https://invoice.stripe.com/i/acct_1Lk4dIwHu7ixAbCd/test_YWNjdF8xTGs0ZEl3SHU3aXhBYkNk"})},
			reply: func(ids []string) map[string]any { return map[string]any{"ok": true, "runId": ids[0]} },
		},
		{
			name: "alertmanager alert group", path: "alert", file: "monitoring-alert.json", status: 200,
			header: func(string) []string { return []string{token} },
			want: []sentAction{
				agentSent(boundary.SourceWebhook, map[string]any{"name": "Alertmanager", "agentId": "ops", "sessionKey": "hook:alerts",
					"deliver": true, "channel": "slack", "to": "#ops",
					"message": "[firing] HighErrorRate (critical) on api-1:9090 since 2026-11-22T09:41:30Z: api-1 answers 7.3% of requests with 5xx.\n" +
						"https://prometheus.example.com/graph?g0.expr=job%3Aerror_ratio%3Arate5m+%3E+0.05"}),
				agentSent(boundary.SourceWebhook, map[string]any{"name": "Alertmanager", "agentId": "ops", "sessionKey": "hook:alerts",
					"deliver": true, "channel": "slack", "to": "#ops",
					"message": "[firing] HighErrorRate (critical) on api-2:9090 since 2026-11-22T09:42:00Z: api-2 answers 5.8% of requests with 5xx.\n" +
						"https://prometheus.example.com/graph?g0.expr=job%3Aerror_ratio%3Arate5m+%3E+0.05"}),
			},
			reply: func(ids []string) map[string]any { return fanoutReply(ids, 0) },
		},
		{
			// a pull_request payload announced as an issues event matches
			// github-issues, whose CEL placeholder then fails
			name: "github event header mismatch", path: "github", file: "github-pull_request.json", status: 400,
			header: githubSigned("issues", "3e6d6f43-c6a1-11f0-a3d4-9d4e5f607182"),
			reply: func([]string) map[string]any {
				return map[string]any{"ok": false, "error": "hook mapping failed: github-issues"}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(in.gw.Received())
			body := readFixture(t, tc.file)
			r := in.do("POST", "/hooks/"+tc.path, body, tc.header(body)...)
			if r.status != tc.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.body, tc.status)
			}
			recs := in.gw.Received()[before:]
			for _, rec := range recs {
				if rec.Status != 200 || rec.IdempotencyKey == "" {
					t.Errorf("gateway answered %d (key %q) to %v", rec.Status, rec.IdempotencyKey, rec.Body)
				}
			}
			runIDs := matchSent(t, sentActions(t, recs, true), tc.want)
			if want := tc.reply(runIDs); !reflect.DeepEqual(r.json(t), want) {
				t.Errorf("reply %s, want %v", r.body, want)
			}
		})
	}
}
