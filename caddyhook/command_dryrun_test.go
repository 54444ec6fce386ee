package caddyhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

const (
	dryToken  = "dry-run-hook-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	drySecret = "dry-run-github-secret-5b4c3d2e1f0a"
)

// dryRunCaddyfile is a config with a gmail preset, a templated wake
// mapping and a GitHub-signed mapping.
const dryRunCaddyfile = `{
	admin off
}
:0 {
	hooks /hooks {
		token {env.CADDYHOOK_DRY_TOKEN}
		gateway unix//tmp/none.sock
		allow_request_session_key
		allowed_session_key_prefixes hook:
		presets gmail
		mapping alert {
			match_path alert
			action wake
			text_template "{{payload.name}} is {{status}} ({{path}})"
		}
		mapping gh {
			match_path github
			match_expr ` + "`" + `headers["x-github-event"] == "ping"` + "`" + `
			message_template "ping {{zen}}"
			verify github {
				secret {env.CADDYHOOK_DRY_SECRET}
			}
		}
	}
}
`

func TestDryRunCommand(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_SECRET", drySecret)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("Caddyfile", dryRunCaddyfile)
	gmail := write("gmail.json", `{"messages":[{"id":"m1","from":"a@b.c","subject":"Hi","snippet":"s1"},{"id":"m2","from":"d@e.f","subject":"Yo"}]}`)
	alert := write("alert.json", `{"name":"db","status":"down"}`)
	ping := `{"zen":"Keep it simple."}`
	pingFile := write("ping.json", ping)
	mac := hmac.New(sha256.New, []byte(drySecret))
	mac.Write([]byte(ping))
	goodSig := "X-Hub-Signature-256: sha256=" + hex.EncodeToString(mac.Sum(nil))

	tests := []struct {
		name     string
		opts     dryRunOptions
		status   int
		rejected bool
		errText  string
		bodies   []map[string]any // gateway bodies; message compared by suffix
		reply    map[string]any   // keys that must be present with these values
	}{
		{
			name: "gmail fan-out", opts: dryRunOptions{path: "gmail", payload: gmail}, status: 200,
			bodies: []map[string]any{
				{"name": "Gmail", "sessionKey": "hook:gmail:m1", "wakeMode": "now", "message": "New email from a@b.c\nSubject: Hi\ns1\n<<<END_EXTERNAL_UNTRUSTED_CONTENT"},
				{"name": "Gmail", "sessionKey": "hook:gmail:m2", "wakeMode": "now", "message": "New email from d@e.f\nSubject: Yo\n<<<END_EXTERNAL_UNTRUSTED_CONTENT"},
			},
			reply: map[string]any{"ok": true, "dispatched": float64(2)},
		},
		{
			name: "wake mapping by full path", opts: dryRunOptions{path: "/hooks/alert", payload: alert}, status: 200,
			bodies: []map[string]any{{"text": "db is down (alert)"}},
			reply:  map[string]any{"ok": true, "mode": "now"},
		},
		{
			name: "signed without token", status: 200,
			opts:   dryRunOptions{path: "github", payload: pingFile, noToken: true, headers: []string{goodSig, "X-GitHub-Event: ping"}},
			bodies: []map[string]any{{"message": "ping Keep it simple.\n<<<END_EXTERNAL_UNTRUSTED_CONTENT"}},
		},
		{
			name: "bad signature", status: 401, rejected: true, errText: "signature verification failed",
			opts: dryRunOptions{path: "github", payload: pingFile, noToken: true, headers: []string{"X-Hub-Signature-256: sha256=00", "X-GitHub-Event: ping"}},
		},
		{
			name: "no token", status: 401, rejected: true, errText: "invalid or missing token",
			opts: dryRunOptions{path: "alert", payload: alert, noToken: true},
		},
		{
			name: "no mapping", status: 404, rejected: true, errText: "no mapping for hook",
			opts: dryRunOptions{path: "nothing", payload: alert},
		},
		{
			name: "policy rejection", status: 400, rejected: true, errText: "message required",
			opts: dryRunOptions{path: "agent", payload: alert},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.config = cfg
			var out, notes bytes.Buffer
			rejected, err := runDryRun(&out, &notes, tc.opts)
			if err != nil {
				t.Fatalf("runDryRun: %v", err)
			}
			if rejected != tc.rejected {
				t.Errorf("rejected = %v, want %v", rejected, tc.rejected)
			}
			if s := out.String() + notes.String(); strings.Contains(s, dryToken) || strings.Contains(s, drySecret) {
				t.Fatalf("output shows a secret:\n%s", s)
			}
			var rep struct {
				Status  int            `json:"status"`
				Error   string         `json:"error"`
				Reply   map[string]any `json:"reply"`
				Actions []struct {
					Kind string         `json:"kind"`
					Key  string         `json:"idempotency_key"`
					Body map[string]any `json:"body"`
				} `json:"actions"`
			}
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if rep.Status != tc.status || !strings.Contains(rep.Error, tc.errText) {
				t.Fatalf("status %d error %q, want %d containing %q", rep.Status, rep.Error, tc.status, tc.errText)
			}
			if len(rep.Actions) != len(tc.bodies) {
				t.Fatalf("%d actions, want %d: %s", len(rep.Actions), len(tc.bodies), out.String())
			}
			for i, want := range tc.bodies {
				got := rep.Actions[i].Body
				if rep.Actions[i].Key == "" {
					t.Errorf("action %d has no idempotency key", i)
				}
				for k, v := range want {
					if k == "message" {
						msg, _ := got[k].(string)
						head, tail, _ := strings.Cut(v.(string), "\n<<<")
						if !strings.Contains(msg, head) || !strings.Contains(msg, "<<<"+tail) {
							t.Errorf("action %d message %q, want content %q", i, msg, head)
						}
						continue
					}
					if got[k] != v {
						t.Errorf("action %d %s = %v, want %v", i, k, got[k], v)
					}
				}
			}
			for k, v := range tc.reply {
				if rep.Reply[k] != v {
					t.Errorf("reply %s = %v, want %v", k, rep.Reply[k], v)
				}
			}
		})
	}
}

func TestDryRunConfigErrors(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two.caddyfile")
	body := strings.Replace(dryRunCaddyfile, ":0 {", ":0 {\n\thooks /other {\n\t\ttoken "+dryToken+"x\n\t}", 1)
	if err := os.WriteFile(two, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "site.conf") // a Caddyfile by a name caddy run does not adapt by itself
	if err := os.WriteFile(conf, []byte(dryRunCaddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // no ./Caddyfile
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_SECRET", "")
	tests := []struct {
		name string
		opts dryRunOptions
		want string
	}{
		{"missing flags", dryRunOptions{}, "--path is required"},
		{"no such file", dryRunOptions{config: filepath.Join(dir, "nope"), path: "x"}, "reading config from file"},
		{"a Caddyfile by another name", dryRunOptions{config: conf, path: "alert"}, "did you mean to use a config adapter (the --adapter flag)?"},
		{"no config", dryRunOptions{path: "alert"}, "no config: give --config <file>, or run it where ./Caddyfile is"},
		{"two handlers", dryRunOptions{config: two, path: "alert"}, "choose one with --base"},
		{"unknown base", dryRunOptions{config: two, path: "alert", base: "/x"}, "no hooks handler with that path"},
		{"bad header", dryRunOptions{config: two, base: "/hooks", path: "alert", headers: []string{"nocolon"}}, "want 'Name: value'"},
		{"bad adapter", dryRunOptions{config: two, path: "alert", adapter: "nginx"}, "unrecognized config adapter: nginx"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, notes bytes.Buffer
			_, err := runDryRun(&out, &notes, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// an unset signing secret is replaced for the dry run, with a note
	// when the hook tested could reach the mapping that verifies with it
	for path, noted := range map[string]bool{"github": true, "/hooks/github": true, "alert": false} {
		var out, notes bytes.Buffer
		if _, err := runDryRun(&out, &notes, dryRunOptions{config: two, base: "/hooks", path: path}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(notes.String(), `{env.CADDYHOOK_DRY_SECRET} is not set; signatures for mapping "gh"`); got != noted {
			t.Errorf("--path %s: notes = %q, want the note: %v", path, notes.String(), noted)
		}
	}
}

// TestDryRunLoadsAsCaddyRun: caddy hooks test loads a config as caddy
// run does (caddycmd.LoadConfig): ./Caddyfile without --config, the
// Caddyfile adapter for a Caddyfile name or with --adapter caddyfile,
// JSON otherwise; a relative transforms_root follows the Caddyfile.
func TestDryRunLoadsAsCaddyRun(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_SECRET", drySecret)
	dir := t.TempDir()
	withTransform := strings.Replace(dryRunCaddyfile, "presets gmail\n", "presets gmail\n\t\ttransforms_root mods\n\t\tmapping t {\n\t\t\tmatch_path t\n\t\t\ttransform t.js\n\t\t}\n", 1)
	writeModules(t, dir, map[string]string{
		"Caddyfile":      withTransform,
		"conf/site.conf": withTransform,
		"mods/t.js":      `export default () => ({ message: "from mods" });`,
		"conf/mods/t.js": `export default () => ({ message: "from conf/mods" });`,
	})
	adapted, _, _, err := caddycmd.LoadConfig(filepath.Join(dir, "Caddyfile"), "")
	if err != nil {
		t.Fatal(err)
	}
	writeModules(t, dir, map[string]string{"site.json": string(adapted)})
	t.Chdir(dir)
	for _, tc := range []struct {
		name string
		o    dryRunOptions
		want string
	}{
		{"./Caddyfile", dryRunOptions{path: "t"}, "from mods"},
		{"--adapter caddyfile", dryRunOptions{config: "conf/site.conf", adapter: "caddyfile", path: "t"}, "from conf/mods"},
		{"JSON", dryRunOptions{config: "site.json", path: "t"}, "from mods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, notes bytes.Buffer
			rejected, err := runDryRun(&out, &notes, tc.o)
			if err != nil || rejected || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("rejected %v, err %v: %s %s; want %q", rejected, err, out.String(), notes.String(), tc.want)
			}
		})
	}
}

// TestDryRunSaysWhySkipped (issue 31 item 5): caddy hooks test shows a
// 204's mapping, its reason and the mappings passed over before it, with
// and without --debug, and a 204 is no rejection (exit status 0).
func TestDryRunSaysWhySkipped(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_SECRET", drySecret)
	dir := t.TempDir()
	cf := strings.Replace(dryRunCaddyfile, "presets gmail\n", "presets gmail\n\t\ttransforms_root mods\n"+
		"\t\tmapping first {\n\t\t\tmatch_path t\n\t\t\tmatch_expr `payload.kind == \"x\"`\n\t\t\tmessage_template \"x\"\n\t\t}\n"+
		"\t\tmapping null {\n\t\t\tmatch_path t\n\t\t\ttransform t.js\n\t\t}\n", 1)
	writeModules(t, dir, map[string]string{"Caddyfile": cf, "mods/t.js": `export default () => null;`, "p.json": `{"kind":"y"}`})
	want := `"status": 204,
  "auth": "token 1 of 1",
  "mapping": "null",
  "reason": "mapping null: transform returned null",
  "passed_over": [
    "first: match_expr false"
  ]`
	for _, debug := range []bool{false, true} {
		args := []string{"test", "--config", filepath.Join(dir, "Caddyfile"), "--path", "t", "--payload", filepath.Join(dir, "p.json")}
		if debug {
			args = append(args, "--debug")
		}
		out, errOut, err := runHooksCommand(args...)
		if err != nil || !strings.Contains(out, want) || strings.Contains(out+errOut, "rejected") {
			t.Fatalf("debug %v: err %v\n%s\n%s\nwant %s", debug, err, out, errOut, want)
		}
	}
}

// TestDryRunTokenRotation (issue 16 item 4): with two tokens configured,
// `caddy hooks test --token` shows which one authenticates; a token no
// longer configured is refused; an unset --token variable is named.
func TestDryRunTokenRotation(t *testing.T) {
	const oldTok, newTok = dryToken, "dry-run-new-token-a1b2c3d4e5f60718293a4b5c6d7e8f90"
	t.Setenv("CADDYHOOK_DRY_TOKEN", oldTok)
	t.Setenv("CADDYHOOK_DRY_TOKEN_NEW", newTok)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	rotating := strings.Replace(dryRunCaddyfile, "token {env.CADDYHOOK_DRY_TOKEN}\n",
		"token {env.CADDYHOOK_DRY_TOKEN}\n\t\ttoken {env.CADDYHOOK_DRY_TOKEN_NEW}\n", 1)
	payload := filepath.Join(dir, "wake.json")
	if err := os.WriteFile(payload, []byte(`{"text":"rotation"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config, token string
		status              int
		auth, errText       string
	}{
		{"first token by default", rotating, "", 200, "token 1 of 2", ""},
		{"new token", rotating, "{env.CADDYHOOK_DRY_TOKEN_NEW}", 200, "token 2 of 2", ""},
		{"old token as a value", rotating, oldTok, 200, "token 1 of 2", ""},
		{"unknown token", rotating, oldTok + "x", 401, "", "invalid or missing token"},
		{"removed token", strings.Replace(dryRunCaddyfile, "{env.CADDYHOOK_DRY_TOKEN}", "{env.CADDYHOOK_DRY_TOKEN_NEW}", 1), oldTok, 401, "", "invalid or missing token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, notes bytes.Buffer
			if _, err := runDryRun(&out, &notes, dryRunOptions{config: cfg, path: "wake", payload: payload, token: tc.token}); err != nil {
				t.Fatal(err)
			}
			if s := out.String(); strings.Contains(s, oldTok) || strings.Contains(s, newTok) {
				t.Fatalf("output shows a token:\n%s", s)
			}
			var rep dryRunReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Status != tc.status || rep.Auth != tc.auth || !strings.Contains(rep.Error, tc.errText) {
				t.Fatalf("report %+v, want status %d auth %q error %q", rep, tc.status, tc.auth, tc.errText)
			}
		})
	}
	if err := os.WriteFile(cfg, []byte(rotating), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runDryRun(io.Discard, io.Discard, dryRunOptions{config: cfg, path: "wake", payload: payload, token: "{env.CADDYHOOK_DRY_UNSET}"})
	if err == nil || !strings.Contains(err.Error(), "--token: {env.CADDYHOOK_DRY_UNSET} is empty: CADDYHOOK_DRY_UNSET is not set") {
		t.Fatalf("unset --token variable: %v", err)
	}
}

// dryRunForwardCaddyfile is a forward-mode config: /wake and /agent and
// the gmail preset are forwarded, and so is a GitHub mapping.
const dryRunForwardCaddyfile = `{
	admin off
}
:0 {
	hooks /hooks {
		token {env.CADDYHOOK_DRY_TOKEN}
		gateway 127.0.0.1:18789
		mode forward
		agents main
		presets gmail
		mapping github {
			match_path github
			forward
		}
	}
}
`

func TestDryRunForward(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(dryRunForwardCaddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wakeBody := "\uFEFF{\"text\":\"deploy done\"}"
	ghBody := `{"action":"opened"}`
	for _, tc := range []struct {
		name    string
		opts    dryRunOptions
		status  int
		errText string
		path    string            // forwarded path ("" = no action)
		body    string            // forwarded body as shown (body or body_text)
		headers map[string]string // headers that must be forwarded ("" = must not be)
	}{
		{name: "wake as sent", opts: dryRunOptions{path: "wake", payload: write("wake.json", wakeBody)}, status: 200,
			path: "/hooks/wake", body: wakeBody, headers: map[string]string{"Authorization": "", "Content-Type": "application/json"}},
		{name: "mapped hook with query and headers", status: 200,
			opts: dryRunOptions{path: "/hooks/github?event=pr&access_token=x", payload: write("gh.json", ghBody),
				headers: []string{"X-GitHub-Event: pull_request", "X-Forwarded-For: 203.0.113.1", "Idempotency-Key: k1"}},
			path: "/hooks/github?event=pr&access_token=x", body: ghBody,
			headers: map[string]string{"X-Github-Event": "pull_request", "X-Forwarded-For": "", "Idempotency-Key": "k1"}},
		{name: "gmail preset forwarded", opts: dryRunOptions{path: "gmail", payload: write("gm.json", `{"messages":[]}`)}, status: 200,
			path: "/hooks/gmail", body: `{"messages":[]}`},
		{name: "parity refusal at the edge", opts: dryRunOptions{path: "agent", payload: write("a.json", `{"message":"m","agentId":"ghost"}`)},
			status: 400, errText: `unknown agentId "ghost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.config = cfg
			var out, notes bytes.Buffer
			if _, err := runDryRun(&out, &notes, tc.opts); err != nil {
				t.Fatalf("runDryRun: %v", err)
			}
			if strings.Contains(out.String(), dryToken) {
				t.Fatalf("output shows the token:\n%s", out.String())
			}
			var rep struct {
				Status  int    `json:"status"`
				Error   string `json:"error"`
				Actions []struct {
					Kind     string            `json:"kind"`
					Forward  bool              `json:"forward"`
					Path     string            `json:"path"`
					Headers  map[string]string `json:"headers"`
					Key      string            `json:"idempotency_key"`
					Body     json.RawMessage   `json:"body"`
					BodyText *string           `json:"body_text"`
				} `json:"actions"`
			}
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if rep.Status != tc.status || rep.Error != tc.errText {
				t.Fatalf("status %d error %q, want %d %q", rep.Status, rep.Error, tc.status, tc.errText)
			}
			if tc.path == "" {
				if len(rep.Actions) != 0 {
					t.Fatalf("actions %+v", rep.Actions)
				}
				return
			}
			if len(rep.Actions) != 1 {
				t.Fatalf("%d actions: %s", len(rep.Actions), out.String())
			}
			a := rep.Actions[0]
			body := string(a.Body)
			if a.BodyText != nil {
				body = *a.BodyText
			}
			if a.Kind != "forward" || !a.Forward || a.Path != tc.path || a.Key != tc.headers["Idempotency-Key"] {
				t.Fatalf("action %+v, want a forward to %s", a, tc.path)
			}
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(body)) == nil && a.BodyText == nil {
				body = compact.String()
			}
			if body != tc.body {
				t.Fatalf("body %q, want %q", body, tc.body)
			}
			for k, v := range tc.headers {
				if a.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, a.Headers[k], v)
				}
			}
		})
	}
}

// TestDryRunQuiet (issue 25 item 4): the README's own dry run, without
// any of the config's variables set, prints nothing on stderr (it used
// to print a warning with a Go stack trace for every stand-in secret);
// a config with real problems gets one line per problem, and stack
// traces only with --debug.
func TestDryRunQuiet(t *testing.T) {
	for _, v := range []string{"HOOK_TOKEN", "GATEWAY_TOKEN", "GATEWAY_SOCKET", "GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET"} {
		testkit.UnsetEnv(t, v)
	}
	t.Chdir("..") // as the README runs it, from the repository root
	// whatever goes to the process's stderr too (a logger of its own)
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = stderr
	var out, notes bytes.Buffer
	rejected, err := runDryRun(&out, &notes, dryRunOptions{config: "Caddyfile.example", path: "alert",
		payload: filepath.Join("testdata", "payloads", "monitoring-alert.json")})
	os.Stderr = saved
	if err != nil || rejected {
		t.Fatalf("dry run of the README example: rejected %v, %v\n%s", rejected, err, out.String())
	}
	logged, _ := os.ReadFile(stderr.Name())
	if s := notes.String() + string(logged); s != "" {
		t.Fatalf("stderr of the README example (%d lines):\n%s", strings.Count(s, "\n"), s)
	}

	cfg := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfg, []byte(`:0 {
	hooks {
		token `+utHookToken+`
		gateway unix//nonexistent/gw.sock
		mapping a {
			message_template "a"
		}
		mapping b {
			match_path b
			message_template "b"
		}
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, debug := range []bool{false, true} {
		notes.Reset()
		if _, err := runDryRun(io.Discard, &notes, dryRunOptions{config: cfg, path: "wake", debug: debug}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(notes.String()), "\n")
		stack := strings.Contains(notes.String(), "caddyhook.(*Handler).warnLiteralSecrets\n")
		switch {
		case !debug && (len(lines) != 2 || stack ||
			!strings.HasPrefix(lines[0], `warn: secret written into the config`) || !strings.HasSuffix(lines[0], `{"field": "token"}`) ||
			!strings.HasPrefix(lines[1], `warn: mapping can never match`) || !strings.HasSuffix(lines[1], `{"mapping": "b", "shadowed_by": "a"}`)):
			t.Errorf("stderr, one line per problem expected:\n%s", notes.String())
		case debug && !stack:
			t.Errorf("stderr with --debug, stack traces expected:\n%s", notes.String())
		}
	}
	if strings.Contains(notes.String(), utHookToken) {
		t.Fatal("the token was printed")
	}
}

// TestDryRunProviders: a dry run of a provider's form (Twilio) shows the
// action its default template renders and the acknowledgement the
// sender gets; a Meta handshake shows its answer; a public_key or
// verify_token placeholder that is not set gets a stand-in (noted), so
// that the config provisions and its signatures never verify.
func TestDryRunProviders(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_TWILIO", pvTwilioSecret)
	testkit.UnsetEnv(t, "CADDYHOOK_DRY_UNSET")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(`{
	admin off
}
:0 {
	hooks /hooks {
		token {env.CADDYHOOK_DRY_TOKEN}
		gateway unix//tmp/none.sock
		mapping sms {
			match_path sms
			verify twilio {
				secret {env.CADDYHOOK_DRY_TWILIO}
				public_url https://hooks.example.com
			}
		}
		mapping discord {
			match_path discord
			verify discord {
				public_key {env.CADDYHOOK_DRY_UNSET}
			}
		}
		mapping wa {
			match_path wa
			verify meta {
				secret {env.CADDYHOOK_DRY_TWILIO}
				verify_token {env.CADDYHOOK_DRY_UNSET}
			}
		}
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	form := "From=%2B15551234567&Body=Hello&MessageSid=SM1&SmsStatus=received"
	payload := filepath.Join(dir, "sms.form")
	if err := os.WriteFile(payload, []byte(form), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, notes bytes.Buffer
	rejected, err := runDryRun(&out, &notes, dryRunOptions{config: cfg, path: "sms", payload: payload, noToken: true,
		headers: twilioHeaders(pvTwilioSecret, "https://hooks.example.com/hooks/sms", form)})
	if err != nil || rejected {
		t.Fatalf("%v (rejected %v)\n%s\n%s", err, rejected, out.String(), notes.String())
	}
	var rep struct {
		Status  int
		Answer  *dryRunAnswer
		Actions []struct{ Body map[string]any }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Answer == nil || rep.Answer.ContentType != "text/xml" || !strings.Contains(rep.Answer.Body, "<Response>") {
		t.Errorf("answer %+v, want the empty TwiML", rep.Answer)
	}
	if len(rep.Actions) != 1 || !strings.Contains(rep.Actions[0].Body["message"].(string), "Twilio message.received from +15551234567 to : Hello") {
		t.Errorf("actions %+v", rep.Actions)
	}
	out.Reset()
	notes.Reset()
	rejected, err = runDryRun(&out, &notes, dryRunOptions{config: cfg, path: "discord", payload: "", noToken: true,
		headers: discordHeaders(pvDiscordKey, "", time.Now())})
	if err != nil || !rejected || !strings.Contains(out.String(), `"status": 401`) {
		t.Fatalf("a stand-in public key verifies nothing: %v %v\n%s", err, rejected, out.String())
	}
	if !strings.Contains(notes.String(), "{env.CADDYHOOK_DRY_UNSET} is not set; signatures for mapping \"discord\" cannot verify") {
		t.Errorf("notes %q", notes.String())
	}
}
