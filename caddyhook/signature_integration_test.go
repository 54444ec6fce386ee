package caddyhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// sigHooks are the hooks-block lines of the signature integration tests:
// one signing mapping per scheme, a require_token one, and secrets taken
// from the environment (setSigEnv).
const sigHooks = `
		max_body 4KiB
		mapping github {
			match_path github
			match_expr ` + "`" + `headers["x-github-event"] == "pull_request"` + "`" + `
			name GitHub
			message_template "PR #{{payload.number}} {{payload.action}} in {{repository.full_name}}: {{pull_request.title}}"
			verify github {
				secret {env.CH_IT_GITHUB_SECRET}
			}
		}
		mapping stripe {
			match_path stripe
			action wake
			text_template "Stripe {{payload.type}} {{data.object.id}}"
			verify stripe {
				secret {env.CH_IT_STRIPE_SECRET}
			}
		}
		mapping slack {
			match_path slack
			name Slack
			message_template "Slack {{event.type}}: {{event.text}}"
			verify slack {
				secret {env.CH_IT_SLACK_SECRET}
			}
		}
		mapping standard {
			match_path standard
			name Svix
			message_template "Standard {{payload.type}} {{data.id}}"
			verify standard {
				secret {env.CH_IT_STANDARD_OLD_SECRET} {env.CH_IT_STANDARD_SECRET}
			}
		}
		mapping generic {
			match_path generic
			name Generic
			message_template "Generic {{payload.type}}"
			verify hmac {
				secret {env.CH_IT_HMAC_SECRET}
				header X-Signature
				prefix sha512=
				algorithm sha512
				encoding base64
				timestamp_header X-Timestamp
				layout {timestamp}.{id}.{body}
				id_header X-Delivery
				tolerance 2m
			}
		}
		mapping strict {
			match_path strict
			message_template "strict {{payload.action}}"
			require_token
			verify github {
				secret {env.CH_IT_GITHUB_SECRET}
			}
		}`

// setSigEnv puts the provider secrets where sigHooks' placeholders look.
func setSigEnv(t *testing.T) {
	t.Helper()
	for name, v := range map[string]string{
		"CH_IT_GITHUB_SECRET":       sigGitHubSecret,
		"CH_IT_STRIPE_SECRET":       sigStripeSecret,
		"CH_IT_SLACK_SECRET":        sigSlackSecret,
		"CH_IT_STANDARD_SECRET":     sigStandardSecret,
		"CH_IT_STANDARD_OLD_SECRET": "whsec_" + "b2xkLXJvdGF0ZWQta2V5LTAxMjM0NTY3", // old-rotated-key-01234567
		"CH_IT_HMAC_SECRET":         sigHMACSecret,
	} {
		t.Setenv(name, v)
	}
}

// githubPullRequestFixture is the GitHub pull_request payload: the shared
// fixture when present, else a trimmed real delivery.
func githubPullRequestFixture(t *testing.T) string {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join("..", "testdata", "payloads", "github-pull_request.json")); err == nil {
		return string(b)
	}
	return `{
  "action": "opened",
  "number": 1347,
  "pull_request": {
    "url": "https://api.github.com/repos/octocat/Hello-World/pulls/1347",
    "id": 1,
    "html_url": "https://github.com/octocat/Hello-World/pull/1347",
    "number": 1347,
    "state": "open",
    "title": "Amazing new feature",
    "user": {"login": "octocat", "id": 1, "type": "User"},
    "body": "Please pull these awesome changes in!",
    "created_at": "2011-01-26T19:01:12Z",
    "head": {"label": "octocat:new-topic", "ref": "new-topic", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
    "base": {"label": "octocat:master", "ref": "master", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
    "draft": false,
    "merged": false,
    "commits": 1,
    "additions": 100,
    "deletions": 3,
    "changed_files": 5
  },
  "repository": {"id": 1296269, "name": "Hello-World", "full_name": "octocat/Hello-World", "private": false,
    "owner": {"login": "octocat", "id": 1}, "html_url": "https://github.com/octocat/Hello-World"},
  "sender": {"login": "octocat", "id": 1, "type": "User"}
}`
}

// TestIntegrationSignedGitHub sends a signed GitHub pull_request through
// a real server without a bearer token: it reaches the gateway; a
// redelivery dispatches once; bad signatures are 401 and 20 of them lock
// the address, after which a token or any other request gets 429 but a
// valid signature still passes.
func TestIntegrationSignedGitHub(t *testing.T) {
	setSigEnv(t)
	in := startIngress(t, ingressOpts{hooks: sigHooks})
	body := githubPullRequestFixture(t)
	var pr struct {
		Number      int `json:"number"`
		PullRequest struct {
			Title string `json:"title"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal([]byte(body), &pr); err != nil || pr.PullRequest.Title == "" {
		t.Fatalf("fixture is not a pull_request event: %v", err)
	}

	first := in.do("POST", "/hooks/github", body, githubHeaders(sigGitHubSecret, body, "72d3162e-cc78-11e3-81ab-4c9367dc0958")...)
	if first.status != 200 {
		t.Fatalf("signed delivery: %d %s", first.status, first.body)
	}
	got := in.gw.Received()
	if len(got) != 1 || got[0].Kind != "agent" {
		t.Fatalf("gateway received %d requests, want one agent action", len(got))
	}
	msg, _ := got[0].Body["message"].(string)
	if want := fmt.Sprintf("PR #%d ", pr.Number); !strings.Contains(msg, want) || !strings.Contains(msg, pr.PullRequest.Title) {
		t.Fatalf("message %q lacks %q and the title", msg, want)
	}
	if first.json(t)["runId"] != got[0].RunID || got[0].Body["name"] != "GitHub" {
		t.Fatalf("reply %s / gateway body %v", first.body, got[0].Body)
	}

	again := in.do("POST", "/hooks/github", body, githubHeaders(sigGitHubSecret, body, "72d3162e-cc78-11e3-81ab-4c9367dc0958")...)
	if again.status != 200 || again.body != first.body {
		t.Fatalf("redelivery: %d %s, want the first reply %s", again.status, again.body, first.body)
	}
	if n := len(in.gw.Received()); n != 1 {
		t.Fatalf("redelivery reached the gateway: %d requests", n)
	}
	other := in.do("POST", "/hooks/github", body, githubHeaders(sigGitHubSecret, body, "8e1c0a52-cc78-11e3-81ab-4c9367dc0958")...)
	if other.status != 200 || other.body == first.body || len(in.gw.Received()) != 2 {
		t.Fatalf("another delivery: %d %s, gateway %d", other.status, other.body, len(in.gw.Received()))
	}

	badSig := githubHeaders("not-the-github-secret-0000", body, "")
	for i := range 20 {
		if r := in.do("POST", "/hooks/github", body, badSig...); r.status != 401 {
			t.Fatalf("bad signature %d: %d %s", i+1, r.status, r.body)
		}
	}
	// locked: nothing is evaluated for the token, every other request is
	// 429, but a valid signature still passes (issue 17 item 11: anyone can
	// point a webhook with a wrong secret at the URL from the provider's
	// shared addresses)
	for name, c := range map[string]struct {
		path, body string
		hdr        []string
	}{
		"valid token":                    {"/hooks/wake", `{"text":"x"}`, []string{"Authorization: Bearer " + itHookToken}},
		"unsigned":                       {"/hooks/github", body, []string{"X-GitHub-Event: pull_request"}},
		"wrong signature":                {"/hooks/github", body, badSig},
		"signature for another body":     {"/hooks/github", `{"text":"x"}`, githubHeaders(sigGitHubSecret, body, "")},
		"valid signature, require_token": {"/hooks/strict", body, githubHeaders(sigGitHubSecret, body, "")},
	} {
		r := in.do("POST", c.path, c.body, c.hdr...)
		if r.status != 429 || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s from the locked address: %d %s, want 429 with Retry-After", name, r.status, r.body)
		}
	}
	if n := len(in.gw.Received()); n != 2 {
		t.Fatalf("gateway saw %d requests, want 2", n)
	}
	r := in.do("POST", "/hooks/github", body, githubHeaders(sigGitHubSecret, body, "9f2d1b63-cc78-11e3-81ab-4c9367dc0958")...)
	if r.status != 200 || len(in.gw.Received()) != 3 {
		t.Fatalf("valid signature from the locked address: %d %s, want 200 and a dispatch", r.status, r.body)
	}
}

// sigProvider signs a body for one mapping of sigHooks at a given time.
type sigProvider struct {
	name    string
	path    string
	body    string
	sign    func(body string, at time.Time) []string
	dated   bool   // the scheme signs a timestamp
	kind    string // gateway action kind
	wantMsg string // in the message (or text) at the gateway
}

// sigProviders are the schemes of sigHooks with a realistic body each.
func sigProviders() []sigProvider {
	return []sigProvider{
		{name: "github", path: "github", body: `{"action":"closed","number":7,"pull_request":{"title":"Fix typo"},"repository":{"full_name":"o/r"}}`,
			sign: func(b string, _ time.Time) []string { return githubHeaders(sigGitHubSecret, b, "") },
			kind: "agent", wantMsg: "PR #7 closed in o/r: Fix typo"},
		{name: "stripe", path: "stripe", body: `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.payment_failed","data":{"object":{"id":"in_1MtHbELkdIwHu7ixl4OzzPMv"}}}`,
			sign: func(b string, at time.Time) []string { return stripeHeaders(sigStripeSecret, b, at) }, dated: true,
			kind: "wake", wantMsg: "Stripe invoice.payment_failed in_1MtHbELkdIwHu7ixl4OzzPMv"},
		{name: "slack", path: "slack", body: `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"<@U0LAN0Z89> deploy?"}}`,
			sign: func(b string, at time.Time) []string { return slackHeaders(sigSlackSecret, b, at) }, dated: true,
			kind: "agent", wantMsg: "Slack app_mention: <@U0LAN0Z89> deploy?"},
		{name: "standard", path: "standard", body: `{"type":"invoice.paid","data":{"id":"inv_123"}}`,
			sign: func(b string, at time.Time) []string {
				return standardHeadersFor(sigStandardKey, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", b, at)
			}, dated: true, kind: "agent", wantMsg: "Standard invoice.paid inv_123"},
		{name: "hmac", path: "generic", body: `{"type":"build.finished"}`,
			sign: func(b string, at time.Time) []string { return hmacHeaders(sigHMACSecret, "d-1", b, at) }, dated: true,
			kind: "agent", wantMsg: "Generic build.finished"},
	}
}

// TestIntegrationSignedProviders accepts each scheme end to end with a
// computed signature, and refuses it tampered, stale, future-dated,
// unsigned, or with the hook token instead of the signature.
func TestIntegrationSignedProviders(t *testing.T) {
	setSigEnv(t)
	in := startIngress(t, ingressOpts{hooks: sigHooks + "\n\t\tauth_failures 255 1m"})
	now := time.Now()
	for _, p := range sigProviders() {
		t.Run(p.name, func(t *testing.T) {
			before := len(in.gw.Received())
			r := in.do("POST", "/hooks/"+p.path, p.body, p.sign(p.body, now)...)
			if r.status != 200 {
				t.Fatalf("signed: %d %s", r.status, r.body)
			}
			got := in.gw.Received()
			if len(got) != before+1 {
				t.Fatalf("signed request: gateway saw %d new requests, want 1", len(got)-before)
			}
			last := got[len(got)-1]
			text, _ := last.Body["message"].(string)
			if last.Kind == "wake" {
				text, _ = last.Body["text"].(string)
			}
			if last.Kind != p.kind || !strings.Contains(text, p.wantMsg) {
				t.Fatalf("gateway got %s %q, want %s containing %q", last.Kind, text, p.kind, p.wantMsg)
			}

			tampered := strings.Replace(p.body, `"type":"`, `"type":"x`, 1)
			if tampered == p.body {
				tampered = strings.Replace(p.body, `"number":7`, `"number":8`, 1)
			}
			refusals := map[string]struct {
				body string
				hdr  []string
			}{
				"tampered body":            {tampered, p.sign(p.body, now)},
				"one byte appended":        {p.body + " ", p.sign(p.body, now)},
				"unsigned":                 {p.body, nil},
				"token instead":            {p.body, []string{"Authorization: Bearer " + itHookToken}},
				"signed for another body":  {p.body, p.sign(tampered, now)},
				"token and tampered":       {tampered, append(p.sign(p.body, now), "Authorization: Bearer "+itHookToken)},
				"signature of another key": {p.body, githubHeaders("some-other-secret-entirely", p.body, "")},
			}
			if p.dated {
				refusals["stale timestamp"] = struct {
					body string
					hdr  []string
				}{p.body, p.sign(p.body, now.Add(-10*time.Minute))}
				refusals["future timestamp"] = struct {
					body string
					hdr  []string
				}{p.body, p.sign(p.body, now.Add(10*time.Minute))}
			}
			for name, c := range refusals {
				if r := in.do("POST", "/hooks/"+p.path, c.body, c.hdr...); r.status != 401 {
					t.Errorf("%s: %d %s, want 401", name, r.status, r.body)
				}
			}
			if n := len(in.gw.Received()); n != before+1 {
				t.Fatalf("refused requests reached the gateway: %d", n-before-1)
			}
		})
	}
	t.Run("standard rotated secret", func(t *testing.T) {
		old := []byte("old-rotated-key-01234567")
		body := `{"type":"rotated","data":{"id":"r1"}}`
		if r := in.do("POST", "/hooks/standard", body, standardHeadersFor(old, "msg_rot", body, now)...); r.status != 200 {
			t.Fatalf("signed with the older of two secrets: %d %s", r.status, r.body)
		}
	})
	t.Run("slack url_verification", func(t *testing.T) {
		before := len(in.gw.Received())
		body := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
		r := in.do("POST", "/hooks/slack", body, slackHeaders(sigSlackSecret, body, now)...)
		if r.status != 200 || r.json(t)["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" || len(r.json(t)) != 1 {
			t.Fatalf("challenge: %d %s", r.status, r.body)
		}
		if r := in.do("POST", "/hooks/slack", body, slackHeaders("wrong-slack-secret-00000", body, now)...); r.status != 401 {
			t.Fatalf("badly signed challenge: %d %s", r.status, r.body)
		}
		if n := len(in.gw.Received()); n != before {
			t.Fatalf("url_verification dispatched %d actions", n-before)
		}
	})
}

// TestIntegrationSignatureRefusals: built-in paths never take a
// signature; require_token wants both credentials; an oversize chunked
// body is 413 before any verification (so it neither passes nor counts
// toward the lockout).
func TestIntegrationSignatureRefusals(t *testing.T) {
	setSigEnv(t)
	in := startIngress(t, ingressOpts{hooks: sigHooks})
	const body = `{"action":"opened","text":"t","message":"m"}`
	token := "Authorization: Bearer " + itHookToken
	sig := githubHeaders(sigGitHubSecret, body, "")
	for _, c := range []struct {
		name, path string
		hdr        []string
		status     int
	}{
		{"wake with a signature only", "wake", sig, 401},
		{"agent with a signature only", "agent", sig, 401},
		{"require_token: signature only", "strict", sig, 401},
		{"require_token: token only", "strict", []string{token}, 401},
		{"require_token: both", "strict", append([]string{token}, sig...), 200},
		{"verify mapping: token, no signature", "github", []string{token, "X-GitHub-Event: pull_request"}, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := in.do("POST", "/hooks/"+c.path, body, c.hdr...); r.status != c.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
			}
		})
	}
	if n := len(in.gw.Received()); n != 1 {
		t.Fatalf("gateway saw %d requests, want 1 (require_token with both)", n)
	}

	big := `{"action":"opened","pad":"` + strings.Repeat("p", 8<<10) + `"}`
	chunked := func(hdr []string) int {
		t.Helper()
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte(big))
			_ = pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, in.base+"/hooks/github", pr)
		req.Header.Set("Content-Type", "application/json")
		for _, h := range hdr {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		resp, err := in.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.ContentLength > 0 {
			t.Fatalf("request was not chunked")
		}
		return resp.StatusCode
	}
	if s := chunked(githubHeaders(sigGitHubSecret, big, "")); s != 413 {
		t.Fatalf("validly signed chunked body over the limit: %d, want 413", s)
	}
	for i := range 25 {
		if s := chunked(githubHeaders("wrong-secret-wrong-secret", big, "")); s != 413 {
			t.Fatalf("badly signed chunked body %d over the limit: %d, want 413", i+1, s)
		}
	}
	if n := len(in.gw.Received()); n != 1 {
		t.Fatalf("a truncated body reached the gateway (%d requests)", n)
	}
	if r := in.do("POST", "/hooks/github", body, githubHeaders(sigGitHubSecret, body, "")...); r.status != 200 {
		t.Fatalf("after 25 oversize bodies: %d %s, want 200 (oversize bodies must not count as auth failures)", r.status, r.body)
	}
}

// TestIntegrationSignatureSecretsStayOut sends good, bad and locked-out
// signed requests and checks no provider secret reaches Caddy's log or the
// adapted config (which keeps the placeholders).
func TestIntegrationSignatureSecretsStayOut(t *testing.T) {
	setSigEnv(t)
	in := startIngress(t, ingressOpts{hooks: sigHooks})
	now := time.Now()
	var sigValues []string // signature header values: with the body, a replayable delivery
	for _, p := range sigProviders() {
		for _, h := range p.sign(p.body, now) {
			if k, v, _ := strings.Cut(h, ":"); strings.Contains(strings.ToLower(k), "signature") {
				sigValues = append(sigValues, strings.TrimSpace(v))
			}
		}
		in.do("POST", "/hooks/"+p.path, p.body, p.sign(p.body, now)...)
		in.do("POST", "/hooks/"+p.path, p.body+" ", p.sign(p.body, now)...)
		in.do("POST", "/hooks/"+p.path, p.body, p.sign(p.body, now.Add(-time.Hour))...)
	}
	for range 20 {
		in.do("POST", "/hooks/github", `{}`, githubHeaders("wrong-secret-wrong-secret", `{}`, "")...)
	}
	logs := in.waitLogs("signature verification failed", "client locked out", `"X-Hub-Signature-256":["REDACTED"]`)
	if len(sigValues) < 5 {
		t.Fatalf("access log lacks the redacted signature entry (%d signatures sent):\n%s", len(sigValues), logs)
	}
	for _, v := range sigValues {
		if strings.Contains(logs, v) {
			t.Errorf("log contains the signature %q", v)
		}
	}
	secrets := []string{sigGitHubSecret, sigStripeSecret, sigSlackSecret, sigStandardSecret, sigHMACSecret,
		strings.TrimPrefix(sigStandardSecret, "whsec_"), string(sigStandardKey), itHookToken, itGatewayToken}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("log contains secret %q…", s[:8])
		}
	}

	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(`:8080 {
	hooks {
		token {env.CH_IT_HOOK_TOKEN}
		gateway unix//run/gw.sock
		`+sigHooks+`
	}
}`), nil)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	for _, s := range secrets {
		if strings.Contains(string(adapted), s) {
			t.Errorf("adapted config contains secret %q…", s[:8])
		}
	}
	if !strings.Contains(string(adapted), `{env.CH_IT_GITHUB_SECRET}`) {
		t.Errorf("adapted config lost the secret placeholder:\n%s", adapted)
	}
}
