package caddyhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestXcaddyJSONMatchesCaddyfileExample proves xcaddy.json is the same
// site as Caddyfile.example (regenerate it with
// `caddy adapt --config Caddyfile.example --pretty | sed "s|$PWD/||" > xcaddy.json`:
// the adapter makes the Caddyfile's relative transforms_root absolute, and
// xcaddy.json keeps it relative to the working directory, the repository's
// root, where a JSON config's relative paths are taken from).
func TestXcaddyJSONMatchesCaddyfileExample(t *testing.T) {
	cf, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(cf, map[string]any{"filename": "../Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt Caddyfile.example: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	adapted = bytes.ReplaceAll(adapted, []byte(`"`+root+`/`), []byte(`"`))
	for _, w := range warnings {
		t.Errorf("adapt warning: %s", w.String())
	}
	native, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(adapted, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(native, &b); err != nil {
		t.Fatalf("xcaddy.json: %v", err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("xcaddy.json differs from the adapted Caddyfile.example:\nadapted: %s", adapted)
	}
	// no silent 200 for a foreign Host (D28 of issue 35): the site names
	// no host, so every Host on its listener reaches the hooks handler
	var cfg struct {
		Apps struct {
			HTTP caddyhttp.App `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(adapted, &cfg); err != nil {
		t.Fatal(err)
	}
	for name, srv := range cfg.Apps.HTTP.Servers {
		if hosts := onlyHosts(srv); hosts != nil {
			t.Errorf("server %s answers only %q: another Host gets Caddy's empty 200", name, hosts)
		}
	}
}

// TestExampleConfigProvisions provisions every module of xcaddy.json (the
// adapted Caddyfile.example) with the secrets ./dev provides, from the
// repository root as ./dev runs it.
func TestExampleConfigProvisions(t *testing.T) {
	for k, v := range map[string]string{
		"HOOK_TOKEN":            "example-hook-token-2b7e151628aed2a6abf7158809cf4f3c",
		"GATEWAY_TOKEN":         "example-gateway-token-3243f6a8885a308d313198a2e0370734",
		"GITHUB_WEBHOOK_SECRET": "example-github-secret-0123456789",
		"STRIPE_WEBHOOK_SECRET": "whsec_example-stripe-secret-0123",
		"GATEWAY_SOCKET":        "/tmp/caddyhook-example.sock",
	} {
		t.Setenv(k, v)
	}
	native, err := os.ReadFile("../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir("..")
	var cfg caddy.Config
	if err := json.Unmarshal(native, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Admin = &caddy.AdminConfig{Disabled: true}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("Caddyfile.example does not provision: %v", err)
	}
}

// TestExampleDryRunsFixtures runs every sample payload of
// testdata/payloads through Caddyfile.example with `caddy hooks test`, as
// the README shows, signed where the mapping verifies a provider
// signature, and checks what the gateway would receive.
func TestExampleDryRunsFixtures(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", fixtureGitHubSecret)
	t.Setenv("STRIPE_WEBHOOK_SECRET", fixtureStripeSecret)
	t.Setenv("GATEWAY_SOCKET", "") // as on a machine that never ran ./dev
	t.Chdir("..")
	tests := []struct {
		path, file string
		signed     func(body string) []string
		kinds      []string
		// want holds body fields every action has; "message" and "text"
		// are compared as substrings.
		want map[string]string
	}{
		{path: "gmail", file: "gmail-batch.json", kinds: []string{"agent", "agent", "agent"},
			want: map[string]string{"name": "Gmail", "agentId": "main", "message": "\nSubject: "}},
		{path: "alert", file: "monitoring-alert.json", kinds: []string{"agent", "agent"},
			want: map[string]string{"agentId": "ops", "channel": "slack", "to": "#ops", "sessionKey": "hook:alerts", "message": "[firing] "}},
		{path: "github", file: "github-pull_request.json", signed: githubSigned("pull_request", "d-1"), kinds: []string{"agent"},
			want: map[string]string{"name": "GitHub", "sessionKey": "hook:github:pr:octo-org/api#42", "message": "PR #42 opened in octo-org/api by mona"}},
		{path: "github", file: "github-push.json", signed: githubSigned("push", "d-2"), kinds: []string{"wake"},
			want: map[string]string{"mode": "now", "text": "GitHub: mona pushed 2 commit(s) to octo-org/api (main): Release v1.8.0\n"}},
		{path: "github", file: "github-issues.json", signed: githubSigned("issues", "d-3"), kinds: []string{"agent"},
			want: map[string]string{"sessionKey": "hook:github:issue:octo-org/api#57", "message": "\nLabels: bug, p1\n"}},
		{path: "stripe", file: "stripe-invoice.payment_failed.json", kinds: []string{"wake"},
			signed: func(body string) []string { return stripeHeaders(fixtureStripeSecret, body, time.Now()) },
			want:   map[string]string{"mode": "now", "text": "Stripe: payment failed for billing@customer.example (49 EUR)"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			file := filepath.Join("testdata/payloads", tc.file)
			opts := dryRunOptions{config: "Caddyfile.example", path: tc.path, payload: file}
			if tc.signed != nil {
				body, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				opts.noToken, opts.headers = true, tc.signed(string(body))
			}
			var out, notes bytes.Buffer
			if rejected, err := runDryRun(&out, &notes, opts); err != nil || rejected {
				t.Fatalf("rejected %v, err %v:\n%s%s", rejected, err, out.String(), notes.String())
			}
			var rep dryRunReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Status != http.StatusOK || len(rep.Actions) != len(tc.kinds) {
				t.Fatalf("status %d with %d actions, want 200 with %d:\n%s", rep.Status, len(rep.Actions), len(tc.kinds), out.String())
			}
			for i, a := range rep.Actions {
				var body map[string]any
				if err := json.Unmarshal(a.Body, &body); err != nil {
					t.Fatal(err)
				}
				if a.Kind != tc.kinds[i] {
					t.Errorf("action %d kind %q, want %q", i, a.Kind, tc.kinds[i])
				}
				for k, v := range tc.want {
					got, _ := body[k].(string)
					if k == "message" || k == "text" {
						if !strings.Contains(got, v) {
							t.Errorf("action %d %s %q does not contain %q", i, k, got, v)
						}
					} else if got != v {
						t.Errorf("action %d %s = %q, want %q", i, k, got, v)
					}
				}
			}
		})
	}
}

// TestExampleAnswersGitHubPing: the "ping" GitHub sends when a webhook is
// created gets a 2xx from Caddyfile.example (so GitHub shows the webhook as
// working) and dispatches nothing.
func TestExampleAnswersGitHubPing(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", fixtureGitHubSecret)
	t.Setenv("GATEWAY_SOCKET", "")
	t.Chdir("..")
	file := filepath.Join("testdata/payloads", "github-ping.json")
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	opts := dryRunOptions{config: "Caddyfile.example", path: "github", payload: file,
		noToken: true, headers: githubSigned("ping", "d-ping")(string(body))}
	var out, notes bytes.Buffer
	if rejected, err := runDryRun(&out, &notes, opts); err != nil || rejected {
		t.Fatalf("ping rejected %v, err %v:\n%s%s", rejected, err, out.String(), notes.String())
	}
	var rep dryRunReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Status != http.StatusNoContent || len(rep.Actions) != 0 {
		t.Fatalf("ping: status %d with %d actions, want 204 and nothing dispatched:\n%s", rep.Status, len(rep.Actions), out.String())
	}
}
