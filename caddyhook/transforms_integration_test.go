package caddyhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// writeModules writes name → source files under dir (creating
// subdirectories) and returns dir.
func writeModules(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// reloadHooks loads the default test Caddyfile plus hooks lines into the
// running server and returns Caddy's error (the old config keeps serving
// when it fails).
func (in *ingress) reloadHooks(hooks string) error {
	anchor := "gateway_token " + itGatewayToken
	return in.tryLoad(strings.Replace(in.currentCaddyfile(in.t), anchor, anchor+"\n"+hooks, 1))
}

// lastAction is the kind and message (agent) or text (wake) of the last
// action the gateway received, and its body.
func lastAction(t *testing.T, in *ingress) (kind, text string, body map[string]any) {
	t.Helper()
	got := in.gw.Received()
	if len(got) == 0 {
		t.Fatal("gateway received nothing")
	}
	last := got[len(got)-1]
	text, _ = last.Body["message"].(string)
	if last.Kind == "wake" {
		text, _ = last.Body["text"].(string)
	}
	return last.Kind, text, last.Body
}

// mappingLines is one `mapping <id>` block answering path id with extra
// lines.
func mappingLines(id string, lines ...string) string {
	return "mapping " + id + " {\n\tmatch_path " + id + "\n\t" + strings.Join(lines, "\n\t") + "\n}\n"
}

// formatModules are one module per supported format and export style,
// TypeScript features, async functions, a relative import and sandbox
// probes.
var formatModules = map[string]string{
	"default.ts": `interface Ctx { payload: { n: number }; path: string; url: { searchParams: { get(k: string): string | null } } }
export default function (ctx: Ctx): { message: string } {
  return { message: "ts-default n=" + ctx.payload.n + " path=" + ctx.path + " q=" + ctx.url.searchParams.get("q") };
}`,
	"named.mts": `export const handle = (ctx: { payload: { n: number } }) => ({ message: "mts-named n=" + ctx.payload.n });
export default () => ({ message: "mts-default must not run" });`,
	"fallback.js": `export function transform(ctx) { return { message: "js-transform n=" + ctx.payload.n }; }`,
	"arrow.mjs":   `export default async ({ payload }) => ({ message: "mjs-default-async n=" + payload.n });`,
	"plain.cjs":   `module.exports = function (ctx) { return { message: "cjs-module-exports n=" + ctx.payload.n }; };`,
	"exports.cjs": `exports.build = (ctx) => ({ message: "cjs-exports-named n=" + ctx.payload.n });`,
	"features.ts": `enum Level { Low = 1, High = 3 }
const enum Tag { A = "alpha" }
interface Box<T> { value: T }
function wrap<T>(value: T): Box<T> { return { value }; }
class Counter<T extends { n: number }> {
  private total = 0;
  constructor(readonly items: T[]) {}
  sum(): number { for (const i of this.items) this.total += i.n; return this.total; }
}
type Payload = { n: number; level?: keyof typeof Level };
export default (ctx: { payload: Payload }) => {
  const lvl = Level[ctx.payload.level ?? "Low"];
  const box = wrap<number>(ctx.payload.n);
  const c = new Counter([{ n: 1 }, { n: box.value }]);
  return { message: "ts-features level=" + lvl + " tag=" + Tag.A + " sum=" + c.sum() + " opt=" + (ctx.payload as any)?.missing?.deep };
};`,
	"async.ts": `const later = <T,>(v: T): Promise<T> => Promise.resolve().then(() => v);
export default async function (ctx: { payload: { n: number } }) {
  const a = await later(ctx.payload.n);
  const [b, c] = await Promise.all([later(2), later(3)]);
  return { message: "ts-async total=" + (a + b + c) };
}`,
	"lib/helper.ts": `export const label = (n: number): string => "helper-" + n;`,
	"imports.ts":    `import { label } from "./lib/helper"; export default (ctx: any) => ({ message: "imports " + label(ctx.payload.n) });`,
	"globals.js": `export default () => {
  const names = ["require", "process", "setTimeout", "setInterval", "fetch", "XMLHttpRequest", "Buffer", "console"];
  return { message: "globals " + names.map((n) => n + "=" + typeof globalThis[n]).join(",") };
};`,
	"useprocess.js":  `export default () => ({ message: "pid " + process.pid });`,
	"dynrequire.cjs": `module.exports = (ctx) => { const r = globalThis["req" + "uire"] || eval("req" + "uire"); return { message: "fs " + r(ctx.payload.m).readFileSync("/etc/hostname") }; };`,
	"headers.js":     `export default (ctx) => ({ message: "auth=" + ctx.headers["authorization"] + " token=" + ctx.headers["x-service-token"] + " probe=" + ctx.headers["x-test"] });`,
}

// TestIntegrationTransformFormats runs every module format and export
// style through a mapping, plus TypeScript features, async functions,
// relative imports, the sandbox (no require, no process) and what ctx
// shows of the request (never the hook token).
func TestIntegrationTransformFormats(t *testing.T) {
	root := writeModules(t, t.TempDir(), formatModules)
	hooks := "transforms_root " + root + "\n"
	for _, m := range []struct{ id, transform string }{
		{"ts", "default.ts"}, {"mts", "named.mts handle"}, {"js", "fallback.js"}, {"mjs", "arrow.mjs"},
		{"cjs", "plain.cjs"}, {"cjs-named", "exports.cjs build"}, {"features", "features.ts"}, {"async", "async.ts"},
		{"imports", "imports.ts"}, {"globals", "globals.js"}, {"process", "useprocess.js"}, {"require", "dynrequire.cjs"},
		{"headers", "headers.js"},
	} {
		hooks += mappingLines(m.id, "transform "+m.transform)
	}
	in := startIngress(t, ingressOpts{hooks: hooks})
	const canary = "PAYLOAD-CANARY-5e1d"
	for _, tc := range []struct {
		path   string
		body   string
		status int
		want   string // in the dispatched message
	}{
		{"ts?q=hello", `{"n":1}`, 200, "ts-default n=1 path=ts q=hello"},
		{"mts", `{"n":2}`, 200, "mts-named n=2"},
		{"js", `{"n":3}`, 200, "js-transform n=3"},
		{"mjs", `{"n":4}`, 200, "mjs-default-async n=4"},
		{"cjs", `{"n":5}`, 200, "cjs-module-exports n=5"},
		{"cjs-named", `{"n":6}`, 200, "cjs-exports-named n=6"},
		{"features", `{"n":41,"level":"High"}`, 200, "ts-features level=3 tag=alpha sum=42 opt=undefined"},
		{"async", `{"n":1}`, 200, "ts-async total=6"},
		{"imports", `{"n":9}`, 200, "imports helper-9"},
		{"globals", `{}`, 200, "globals require=undefined,process=undefined,setTimeout=undefined,setInterval=undefined,fetch=undefined,XMLHttpRequest=undefined,Buffer=undefined,console=undefined"},
		{"headers", `{}`, 200, "auth=undefined token=undefined probe=probe"},
		{"process", `{"c":"` + canary + `"}`, 500, ""},
		{"require", `{"m":"fs","c":"` + canary + `"}`, 500, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := len(in.gw.Received())
			r := in.post("/hooks/"+tc.path, tc.body, "X-Test: probe", "x-service-token: "+itHookToken)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status != 200 {
				if r.json(t)["error"] != "hook transform failed: "+tc.path {
					t.Fatalf("error %s, want hook transform failed: %s", r.body, tc.path)
				}
				if len(in.gw.Received()) != before {
					t.Fatal("a failed transform dispatched")
				}
				return
			}
			if _, text, _ := lastAction(t, in); !strings.Contains(text, tc.want) {
				t.Fatalf("message %q does not contain %q", text, tc.want)
			}
		})
	}
	// a failed transform is logged with its mapping id and JS error
	logs := in.waitLogs(`"mapping":"process"`, "process is not defined", `"mapping":"require"`)
	if strings.Contains(logs, canary) {
		t.Error("log contains payload content")
	}
}

// TestIntegrationTransformOverrides: transform fields override the
// rendered templates; fields it leaves out or sets to null keep the
// mapping's; kind and allowUnsafeExternalContent switch (any kind but
// "wake" is agent, as in the gateway); null skips with 204; a non-object
// result overrides nothing; an empty message and a throw are refused.
func TestIntegrationTransformOverrides(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{
		"override.js": `export default ({ payload }) => ({ message: "from transform " + payload.m, deliver: false, name: null, thinking: "high" });`,
		"towake.js":   `export default ({ payload }) => ({ kind: "wake", text: "woken by " + payload.m, mode: "next-heartbeat" });`,
		"toagent.js":  `export default ({ payload }) => ({ kind: "agent", message: "agent from wake mapping " + payload.m });`,
		"unsafe.js":   `export default ({ payload }) => ({ message: "raw " + payload.m, allowUnsafeExternalContent: payload.raw });`,
		"skip.js":     `export default ({ payload }) => payload.m === "skip" ? null : { message: "kept " + payload.m };`,
		"empty.js":    `export default () => ({ message: "   " });`,
		"array.js":    `export default () => ["not", "an", "object"];`,
		"throws.js":   `export default () => { throw new Error("transform said no"); };`,
		"badkind.js":  `export default ({ payload }) => ({ kind: payload.k, message: "m", text: "t" });`,
	})
	hooks := "agents main ops\ntransforms_root " + root + "\n" +
		mappingLines("override", "name Templated", "agent_id ops", `message_template "templated {{payload.m}}"`, "deliver true", "transform override.js") +
		mappingLines("towake", `message_template "templated agent {{payload.m}}"`, "transform towake.js") +
		mappingLines("toagent", "action wake", `text_template "templated wake"`, "transform toagent.js") +
		mappingLines("unsafe", "transform unsafe.js") +
		mappingLines("unsafe-mapping", "allow_unsafe_external_content", "transform unsafe.js") +
		mappingLines("skip", `message_template "never {{payload.m}}"`, "transform skip.js") +
		mappingLines("empty", "transform empty.js") +
		mappingLines("array", "transform array.js") +
		mappingLines("throws", "transform throws.js") +
		mappingLines("badkind", "transform badkind.js")
	in := startIngress(t, ingressOpts{hooks: hooks})
	const wrapped, unwrapped = true, false
	for _, tc := range []struct {
		name, path, body string
		status           int
		kind, text       string         // dispatched action
		fields           map[string]any // more fields of the gateway body
		wrap             bool           // message inside the external-content wrapper
		err              string         // error of a refusal
	}{
		{name: "transform fields win, null and absent keep the template", path: "override", body: `{"m":"x"}`, status: 200, kind: "agent", text: "from transform x",
			fields: map[string]any{"name": "Templated", "agentId": "ops", "deliver": false, "thinking": "high"}, wrap: wrapped},
		{name: "kind agent to wake", path: "towake", body: `{"m":"y"}`, status: 200, kind: "wake", text: "woken by y", fields: map[string]any{"mode": "next-heartbeat"}},
		{name: "kind wake to agent", path: "toagent", body: `{"m":"z"}`, status: 200, kind: "agent", text: "agent from wake mapping z", wrap: wrapped},
		{name: "transform allows unsafe content", path: "unsafe", body: `{"m":"u","raw":true}`, status: 200, kind: "agent", text: "raw u", wrap: unwrapped},
		{name: "transform keeps the wrapper", path: "unsafe", body: `{"m":"u","raw":false}`, status: 200, kind: "agent", text: "raw u", wrap: wrapped},
		{name: "transform false beats mapping true", path: "unsafe-mapping", body: `{"m":"v","raw":false}`, status: 200, kind: "agent", text: "raw v", wrap: wrapped},
		{name: "absent keeps mapping true", path: "unsafe-mapping", body: `{"m":"v"}`, status: 200, kind: "agent", text: "raw v", wrap: unwrapped},
		{name: "null skips", path: "skip", body: `{"m":"skip"}`, status: 204},
		{name: "object does not skip", path: "skip", body: `{"m":"k"}`, status: 200, kind: "agent", text: "kept k", wrap: wrapped},
		{name: "empty message", path: "empty", body: `{}`, status: 400, err: "hook mapping empty requires message"},
		{name: "non-object result overrides nothing", path: "array", body: `{}`, status: 400, err: "hook mapping array requires message"},
		{name: "throw", path: "throws", body: `{}`, status: 500, err: "hook transform failed: throws"},
		{name: "any kind but wake is agent", path: "badkind", body: `{"k":"shutdown"}`, status: 200, kind: "agent", text: "m", wrap: wrapped},
		{name: "kind upper case is agent", path: "badkind", body: `{"k":"WAKE"}`, status: 200, kind: "agent", text: "m", wrap: wrapped},
		{name: "kind not a string is agent", path: "badkind", body: `{"k":5}`, status: 200, kind: "agent", text: "m", wrap: wrapped},
		{name: "kind null keeps the mapping's", path: "badkind", body: `{"k":null}`, status: 200, kind: "agent", text: "m", wrap: wrapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(in.gw.Received())
			r := in.post("/hooks/"+tc.path, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status != 200 {
				if n := len(in.gw.Received()) - before; n != 0 {
					t.Fatalf("dispatched %d actions", n)
				}
				if tc.status == 204 && r.body != "" {
					t.Fatalf("204 with a body %q", r.body)
				}
				if tc.err != "" && r.json(t)["error"] != tc.err {
					t.Fatalf("error %s, want %q", r.body, tc.err)
				}
				return
			}
			kind, text, body := lastAction(t, in)
			isWrapped := strings.Contains(text, "<<<EXTERNAL_UNTRUSTED_CONTENT")
			if kind != tc.kind || !strings.Contains(text, tc.text) || strings.Contains(text, "templated") || (kind == "agent" && isWrapped != tc.wrap) {
				t.Fatalf("gateway got %s %q (wrapped %v), want %s with %q (wrapped %v)", kind, text, isWrapped, tc.kind, tc.text, tc.wrap)
			}
			if !tc.wrap && text != tc.text {
				t.Fatalf("unwrapped message %q, want exactly %q", text, tc.text)
			}
			for k, want := range tc.fields {
				if body[k] != want {
					t.Errorf("%s = %v, want %v", k, body[k], want)
				}
			}
		})
	}
}

// TestIntegrationTransformSessionKey: a session key set by a transform
// counts as request-supplied, even over an operator-set literal key.
func TestIntegrationTransformSessionKey(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{
		"key.js": `export default ({ payload }) => payload.k ? { message: "m", sessionKey: payload.k } : { message: "m" };`,
	})
	for _, tc := range []struct {
		name    string
		policy  string
		body    string
		status  int
		want    string // gateway sessionKey, or the error
		literal bool   // the mapping has session_key hook:static
	}{
		{"disabled", "", `{"k":"hook:t:1"}`, 400, string(errSessionKeyDisabled), false},
		{"disabled over a literal key", "", `{"k":"hook:t:1"}`, 400, string(errSessionKeyDisabled), true},
		{"literal key without transform key", "", `{}`, 200, "hook:static", true},
		{"allowed", "allow_request_session_key\nallowed_session_key_prefixes hook:", `{"k":"HOOK:t:2"}`, 200, "HOOK:t:2", false},
		{"outside the prefixes", "allow_request_session_key\nallowed_session_key_prefixes hook:", `{"k":"agent:main:x"}`, 400, "sessionKey must start with one of: hook:", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"transform key.js"}
			if tc.literal {
				lines = append(lines, "session_key hook:static")
			}
			in := startIngress(t, ingressOpts{hooks: tc.policy + "\ntransforms_root " + root + "\n" + mappingLines("key", lines...)})
			r := in.post("/hooks/key", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.status != 200 {
				if r.json(t)["error"] != tc.want || len(in.gw.Received()) != 0 {
					t.Fatalf("error %s, want %q and nothing dispatched", r.body, tc.want)
				}
				return
			}
			if _, _, body := lastAction(t, in); body["sessionKey"] != tc.want {
				t.Fatalf("sessionKey %v, want %q", body["sessionKey"], tc.want)
			}
		})
	}
}

// TestIntegrationTransformExamples wires the repository's example
// transforms: the GitHub TypeScript one behind a GitHub signature, the
// Stripe one behind a Stripe signature, and the skip one.
func TestIntegrationTransformExamples(t *testing.T) {
	setSigEnv(t)
	root, err := filepath.Abs(filepath.Join("..", "testdata", "transforms"))
	if err != nil {
		t.Fatal(err)
	}
	in := startIngress(t, ingressOpts{hooks: `
		allow_request_session_key
		allowed_session_key_prefixes hook:
		transforms_root ` + root + `
		mapping github {
			match_path github
			transform github.ts
			verify github {
				secret {env.CH_IT_GITHUB_SECRET}
			}
		}
		mapping stripe {
			match_path stripe
			transform {
				module stripe.js
				export transform
			}
			verify stripe {
				secret {env.CH_IT_STRIPE_SECRET}
			}
		}
		mapping skip {
			match_path skip
			transform skip.js
		}`})
	var event struct {
		Number      int `json:"number"`
		PullRequest struct {
			User struct {
				Login string `json:"login"`
			} `json:"user"`
		} `json:"pull_request"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	var fields map[string]any
	opened := githubPullRequestFixture(t)
	if err := json.Unmarshal([]byte(opened), &event); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(opened), &fields); err != nil {
		t.Fatal(err)
	}
	fields["action"] = "opened"
	openedJSON, _ := json.Marshal(fields)
	opened = string(openedJSON)
	r := in.do("POST", "/hooks/github", opened, githubHeaders(sigGitHubSecret, opened, "d-opened")...)
	if r.status != 200 {
		t.Fatalf("opened PR: %d %s", r.status, r.body)
	}
	kind, text, body := lastAction(t, in)
	repo := event.Repository.FullName
	if want := fmt.Sprintf("PR #%d opened in %s by %s", event.Number, repo, event.PullRequest.User.Login); kind != "agent" ||
		!strings.Contains(text, want) || body["name"] != "GitHub" || body["sessionKey"] != fmt.Sprintf("hook:github:pr:%s#%d", repo, event.Number) {
		t.Fatalf("opened PR dispatched %s %q %v, want a message with %q", kind, text, body, want)
	}
	fields["action"] = "closed"
	closedJSON, _ := json.Marshal(fields)
	closed := string(closedJSON)
	if r := in.do("POST", "/hooks/github", closed, githubHeaders(sigGitHubSecret, closed, "d-closed")...); r.status != 204 {
		t.Fatalf("closed PR: %d %s, want 204", r.status, r.body)
	}
	failed := `{"id":"evt_1","type":"invoice.payment_failed","data":{"object":{"id":"in_9","customer_email":"a@example.com","amount_due":1250,"currency":"eur"}}}`
	if r := in.do("POST", "/hooks/stripe", failed, stripeHeaders(sigStripeSecret, failed, time.Now())...); r.status != 200 {
		t.Fatalf("payment failed: %d %s", r.status, r.body)
	}
	if kind, text, _ := lastAction(t, in); kind != "wake" || text != "Stripe: payment failed for a@example.com (12.5 EUR) invoice in_9" {
		t.Fatalf("payment failed dispatched %s %q", kind, text)
	}
	paid := `{"id":"evt_2","type":"invoice.paid","data":{"object":{"id":"in_9"}}}`
	if r := in.do("POST", "/hooks/stripe", paid, stripeHeaders(sigStripeSecret, paid, time.Now())...); r.status != 204 {
		t.Fatalf("invoice paid: %d %s, want 204", r.status, r.body)
	}
	if r := in.post("/hooks/skip", `{"anything":1}`); r.status != 204 {
		t.Fatalf("skip: %d %s, want 204", r.status, r.body)
	}
	if n := len(in.gw.Received()); n != 2 {
		t.Fatalf("gateway saw %d actions, want 2", n)
	}
}

// TestTransformConfinement refuses, at provision and naming the mapping,
// every way of pointing a transform outside the transforms directory, and
// modules that do not compile (naming file and line).
func TestTransformConfinement(t *testing.T) {
	base := t.TempDir()
	root := writeModules(t, filepath.Join(base, "root"), map[string]string{
		"ok.js":         `export default () => ({ message: "ok" });`,
		"sub/inner.js":  `export default () => ({ message: "inner" });`,
		"syntax.ts":     "export default () => {\n  return { message: 'x' ;\n};\n",
		"imports-fs.js": "// a builtin\nimport fs from \"fs\";\nexport default () => ({ message: String(fs) });\n",
		"escape.js":     `import x from "../outside/evil.js"; export default () => x;`,
		"throwing.js":   `throw new Error("top-level failure"); export default () => ({});`,
		"noexport.js":   `export const other = () => ({});`,
		"notes.txt":     `not a module`,
	})
	outside := writeModules(t, filepath.Join(base, "outside"), map[string]string{"evil.js": `export default () => ({ message: "escaped" });`})
	mustSymlink := func(target, link string) {
		t.Helper()
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	mustSymlink(filepath.Join(outside, "evil.js"), filepath.Join(root, "link.js"))
	mustSymlink(outside, filepath.Join(root, "linkdir"))
	mustSymlink(filepath.Join(root, "ok.js"), filepath.Join(root, "inside-link.js"))

	for _, tc := range []struct {
		name    string
		module  string
		dir     string // transforms_dir
		rootDir string // transforms_root ("" = root)
		want    string // in the error; "" = provisions
	}{
		{name: "relative", module: "ok.js"},
		{name: "subdirectory", module: "sub/inner.js"},
		{name: "absolute inside", module: filepath.Join(root, "ok.js")},
		{name: "symlink inside", module: "inside-link.js"},
		{name: "transforms_dir inside", module: "inner.js", dir: "sub"},
		{name: "absolute outside", module: filepath.Join(outside, "evil.js"), want: "outside the transforms dir"},
		{name: "dot-dot", module: "../outside/evil.js", want: `".." segment`},
		{name: "dot-dot inside a path", module: "sub/../../outside/evil.js", want: `".." segment`},
		{name: "encoded dot-dot slash", module: "..%2foutside%2fevil.js", want: "percent-encoded"},
		{name: "encoded dots", module: "%2e%2e/outside/evil.js", want: "percent-encoded"},
		{name: "backslash", module: `..\outside\evil.js`, want: "backslash"},
		{name: "symlinked file escaping", module: "link.js", want: "outside the transforms dir"},
		{name: "symlinked directory escaping", module: "linkdir/evil.js", want: "outside the transforms dir"},
		{name: "missing file", module: "absent.js", want: "does not exist"},
		{name: "not a module", module: "notes.txt", want: "unsupported extension"},
		{name: "transforms_dir outside", module: "evil.js", dir: "../outside", want: "transforms dir"},
		{name: "transforms_dir absolute outside", module: "evil.js", dir: outside, want: "outside the transforms root"},
		{name: "transforms_dir symlink escaping", module: "evil.js", dir: "linkdir", want: "outside the transforms root"},
		{name: "missing root", module: "ok.js", rootDir: filepath.Join(base, "absent"), want: "transforms root"},
		{name: "syntax error", module: "syntax.ts", want: "syntax.ts:2"},
		{name: "builtin import", module: "imports-fs.js", want: `imports-fs.js:2`},
		{name: "import escaping", module: "escape.js", want: "refused"},
		{name: "top level throws", module: "throwing.js", want: "top-level failure"},
		{name: "missing export", module: "noexport.js", want: "noexport.js"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			h.TransformsRoot = root
			if tc.rootDir != "" {
				h.TransformsRoot = tc.rootDir
			}
			h.TransformsDir = tc.dir
			h.Mappings = []Mapping{{ID: "attack", MatchPath: "x", Transform: &TransformRef{Module: tc.module}}}
			err := provision(t, h)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Provision: %v", err)
			case tc.want == "":
				if h.router.mappings[0].transform == nil {
					t.Fatal("no transform compiled")
				}
			case err == nil:
				t.Fatalf("provisioned, want an error containing %q", tc.want)
			case !strings.Contains(err.Error(), "mapping attack") || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to name mapping attack and contain %q", err, tc.want)
			}
		})
	}
}

// TestIntegrationTransformReload: a config reload picks up an edited
// module; a reload whose module no longer compiles is refused (naming
// file and line) and the running config keeps serving.
func TestIntegrationTransformReload(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{"v.js": `export default () => ({ message: "version one" });`})
	hooks := "transforms_root " + root + "\n" + mappingLines("v", "transform v.js")
	in := startIngress(t, ingressOpts{hooks: hooks})
	check := func(want string) {
		t.Helper()
		// Right after a reload, a connection can land on the old
		// listener as it closes and be reset; a client retries those.
		var resp *http.Response
		for deadline := time.Now().Add(15 * time.Second); ; {
			req, _ := http.NewRequest(http.MethodPost, in.base+"/hooks/v", strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+itHookToken)
			var err error
			if resp, err = in.client.Do(req); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST /hooks/v: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if _, text, _ := lastAction(t, in); !strings.Contains(text, want) {
			t.Fatalf("message %q, want %q", text, want)
		}
	}
	check("version one")
	// same size, other content; the running config keeps its program
	writeModules(t, root, map[string]string{"v.js": `export default () => ({ message: "version two" });`})
	check("version one")
	if err := in.reloadHooks(hooks); err != nil {
		t.Fatalf("reload: %v", err)
	}
	check("version two")
	writeModules(t, root, map[string]string{"v.js": "export default () => ({\n  message: \"broken\"\n;\n"})
	err := in.reloadHooks(hooks)
	if err == nil || !strings.Contains(err.Error(), "mapping v") || !strings.Contains(err.Error(), "v.js:3") {
		t.Fatalf("reload with a broken module: %v, want an error naming mapping v and v.js:3", err)
	}
	check("version two")
}

// TestIntegrationTransformsRoot (issue 33 item 6): a relative
// transforms_root, and the default hooks/transforms, are relative to the
// Caddyfile they are written in, as Caddy's import resolves a path: a
// config loaded from another file (caddy reload --config other adapts in
// the CLI and posts the JSON) takes that file's directory, a file
// imported from a subdirectory its own; in a JSON config a relative root
// is taken relative to the working directory. (Before, both followed the
// --config of Caddy's command line, or the working directory.)
func TestIntegrationTransformsRoot(t *testing.T) {
	gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	top := t.TempDir()
	module := func(s string) string { return `export default () => ({ message: "from ` + s + `" });` }
	writeModules(t, top, map[string]string{
		"a/hooks/transforms/t.js": module("a"),
		"b/hooks/transforms/t.js": module("b"),
		"b/conf.d/mods/t.js":      module("b/conf.d"),
		"wd/rel/t.js":             module("the working directory"),
		"b/conf.d/hooks.caddy": `hooks {
	token ` + itHookToken + `
	gateway unix/` + gw.sock + `
	gateway_token ` + itGatewayToken + `
	` + testTransformTimeout + `
	transforms_root mods
	` + mappingLines("t", "transform t.js") + `
}
`,
	})
	in := &ingress{t: t, dir: top, sock: gw.sock, gw: gw.Gateway}
	in.client, in.reloaded = newIngressClient(15 * time.Second)
	t.Cleanup(func() { _ = caddy.Stop() })
	site := func(body string) string {
		return "{\n\tadmin off\n\tauto_https off\n\tpersist_config off\n}\n" + testSiteAddress + " {\n\tbind 127.0.0.1\n" + body + "\n}\n"
	}
	hooks := func(lines string) string {
		return "hooks {\n\ttoken " + itHookToken + "\n\tgateway unix/" + gw.sock + "\n\tgateway_token " + itGatewayToken +
			"\n\t" + testTransformTimeout + "\n" + lines + mappingLines("t", "transform t.js") + "}"
	}
	message := func() string {
		t.Helper()
		n := len(gw.Received())
		if r := in.post("/hooks/t", `{}`); r.status != http.StatusOK {
			t.Fatalf("POST /hooks/t: %d %s", r.status, r.body)
		}
		got := gw.Received()
		if len(got) != n+1 {
			t.Fatalf("the gateway got %d requests, want 1", len(got)-n)
		}
		msg, _ := got[n].Body["message"].(string)
		return msg
	}
	for _, tc := range []struct {
		name, file, cf, want string
	}{
		{"default root, a/Caddyfile", "a/Caddyfile", site(hooks("")), "from a"},
		{"default root, reloaded from b/Caddyfile", "b/Caddyfile", site(hooks("")), "from b"},
		{"relative root, b/Caddyfile", "b/Caddyfile", site(hooks("transforms_root hooks/transforms\n")), "from b"},
		{"relative root in b/conf.d/hooks.caddy, imported by b/Caddyfile", "b/Caddyfile", site("import conf.d/hooks.caddy"), "from b/conf.d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.file = filepath.Join(top, tc.file)
			in.load(tc.cf)
			if got := message(); !strings.Contains(got, tc.want) {
				t.Fatalf("message %q, want it %q", got, tc.want)
			}
		})
	}
	t.Run("JSON: relative to the working directory", func(t *testing.T) {
		in.file = filepath.Join(top, "b", "Caddyfile")
		cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(site(hooks("transforms_root hooks/transforms\n"))), map[string]any{"filename": in.file})
		if err != nil {
			t.Fatal(err)
		}
		abs := filepath.Join(top, "b", "hooks", "transforms")
		if !bytes.Contains(cfg, []byte(`"transforms_root":"`+abs+`"`)) {
			t.Fatalf("the adapted config does not carry the absolute root %s: %s", abs, cfg)
		}
		t.Chdir(filepath.Join(top, "wd"))
		if err := caddy.Load(bytes.Replace(cfg, []byte(abs), []byte("rel"), 1), true); err != nil {
			t.Fatal(err)
		}
		in.base = "http://" + firstListenAddr(t)
		if got := message(); !strings.Contains(got, "from the working directory") {
			t.Fatalf("message %q, want it from wd/rel", got)
		}
	})
}

// TestCaddyfilePath: a path written in a Caddyfile, resolved as Caddy's
// import resolves one.
func TestCaddyfilePath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, path, want string }{
		{"/etc/caddy/Caddyfile", "hooks/transforms", "/etc/caddy/hooks/transforms"},
		{"/etc/caddy/conf.d/site.caddy", "../t", "/etc/caddy/t"},
		{"/etc/caddy/Caddyfile", "/srv/t", "/srv/t"},
		{"rel/Caddyfile", "t", filepath.Join(wd, "rel", "t")},
		{"Caddyfile", "t", filepath.Join(wd, "t")},
		{"", "t", filepath.Join(wd, "t")}, // a Caddyfile without a name (POSTed to /load): the working directory's
		{"/etc/caddy/Caddyfile", "", ""},
	} {
		if got := caddyfilePath(tc.file, tc.path); got != tc.want {
			t.Errorf("caddyfilePath(%q, %q) = %q, want %q", tc.file, tc.path, got, tc.want)
		}
	}
}

// TestIntegrationTransformBudget: an infinite loop is stopped by the time
// budget and answered 500 (the bound only proves it did not hang; how
// soon it stops is for the benchmarks); the server then still serves.
func TestIntegrationTransformBudget(t *testing.T) {
	const budget = 100 * time.Millisecond
	root := writeModules(t, t.TempDir(), map[string]string{
		"loop.js":  `export default () => { for (;;) {} };`,
		"spin.ts":  `export default async () => { await null; let i = 0; while (true) { i = (i + 1) % 7; } };`,
		"catch.js": `export default () => { for (;;) { try { for (;;) {} } catch (e) {} } };`,
		"ok.js":    `export default () => ({ message: "still fine" });`,
	})
	hooks := fmt.Sprintf("transform_timeout %s\ntransforms_root %s\n", budget, root)
	for _, id := range []string{"loop", "spin", "catch", "ok"} {
		hooks += mappingLines(id, "transform "+map[string]string{"loop": "loop.js", "spin": "spin.ts", "catch": "catch.js", "ok": "ok.js"}[id])
	}
	in := startIngress(t, ingressOpts{hooks: hooks})
	for _, id := range []string{"loop", "spin", "catch"} {
		t.Run(id, func(t *testing.T) {
			start := time.Now()
			r := in.post("/hooks/"+id, `{}`)
			elapsed := time.Since(start)
			if r.status != 500 || r.json(t)["error"] != "hook transform failed: "+id {
				t.Fatalf("%d %s, want 500 hook transform failed: %s", r.status, r.body, id)
			}
			t.Logf("answered after %v (budget %v)", elapsed.Round(time.Millisecond), budget)
			if elapsed > hangBound {
				t.Fatalf("answered after %v: the budget %v did not stop the loop", elapsed, budget)
			}
		})
	}
	if r := in.post("/hooks/ok", `{}`); r.status != 200 {
		t.Fatalf("after the loops: %d %s", r.status, r.body)
	}
}

// heapPeak runs f while sampling the Go heap (live objects plus
// unswept garbage) every millisecond and returns the largest growth over
// the level before f, after a GC.
func heapPeak(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	return peak.Load()
}

// TestIntegrationTransformMemoryBombs: memory bombs are stopped (500)
// without the process heap growing by 256 MiB.
func TestIntegrationTransformMemoryBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	bombs := map[string]string{
		"repeat":  `export default () => ({ message: "x".repeat(1e9) });`,
		"array":   `export default () => { const a = []; for (let i = 0; ; i++) a.push({ i, s: "item-" + i }); };`,
		"strings": `export default () => { const a = []; for (;;) a.push("x".repeat(64) + a.length); };`,
		"double":  `export default () => { let s = "x"; for (;;) s += s; };`,
		"result":  `export default () => { const o = {}; for (let i = 0; i < 2e5; i++) o["k" + i] = "v".repeat(64); return o; };`,
	}
	root := writeModules(t, t.TempDir(), map[string]string{})
	hooks := "transform_timeout 10s\ntransforms_root " + root + "\n"
	for id, src := range bombs {
		writeModules(t, root, map[string]string{id + ".js": src})
		hooks += mappingLines(id, "transform "+id+".js")
	}
	in := startIngress(t, ingressOpts{hooks: hooks})
	const limit = 256 << 20
	for id := range bombs {
		t.Run(id, func(t *testing.T) {
			var r result
			var elapsed time.Duration
			grew := heapPeak(func() {
				start := time.Now()
				r = in.post("/hooks/"+id, `{}`)
				elapsed = time.Since(start)
			})
			t.Logf("answered %d after %v; heap +%d MiB", r.status, elapsed.Round(time.Millisecond), grew>>20)
			if r.status != 500 || r.json(t)["error"] != "hook transform failed: "+id {
				t.Fatalf("%d %s, want 500 hook transform failed: %s", r.status, r.body, id)
			}
			if grew >= limit {
				t.Fatalf("heap grew by %d MiB, limit %d MiB", grew>>20, limit>>20)
			}
		})
	}
}

// TestIntegrationTransformConcurrency sends 200 requests at once through
// one transform: all succeed, each with its own result.
func TestIntegrationTransformConcurrency(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{
		"c.ts": `export default async (ctx: { payload: { i: number } }) => {
  let h = 0;
  for (let k = 0; k < 100; k++) h = (h * 31 + k + ctx.payload.i) % 1000003;
  await null;
  return { message: "request " + ctx.payload.i + " hash " + h };
};`,
	})
	// a time budget no call reaches however loaded the machine: this test
	// is about concurrent calls (TestIntegrationTransformBudget is about
	// budgets). The memory limit is the default: the heap check charges a
	// call with its CPU share of the process's heap growth, which 200
	// requests in flight (more so under -race) grow on their own
	in := startIngress(t, ingressOpts{hooks: "transform_timeout 10s\ntransforms_root " + root + "\n" + mappingLines("c", "transform c.ts")})
	const n = 200
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest(http.MethodPost, in.base+"/hooks/c", strings.NewReader(fmt.Sprintf(`{"i":%d}`, i)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+itHookToken)
			resp, err := in.client.Do(req)
			if err != nil {
				return // status 0
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	failed := 0
	for i, s := range statuses {
		if s != 200 {
			failed++
			t.Errorf("request %d: %d", i, s)
		}
	}
	if failed > 0 {
		for _, line := range strings.Split(in.waitLogs("hook transform failed"), "\n") {
			if strings.Contains(line, "hook transform failed") {
				t.Log(line)
			}
		}
	}
	seen := map[string]bool{}
	for _, rec := range in.gw.Received() {
		msg, _ := rec.Body["message"].(string)
		i := strings.Index(msg, "request ")
		if i < 0 {
			t.Fatalf("message %q", msg)
		}
		seen[strings.Fields(msg[i:])[1]] = true
	}
	if len(seen) != n {
		t.Fatalf("gateway saw %d distinct results, want %d", len(seen), n)
	}
}

// TestIntegrationTransformBigIntBombs reproduces issue 34 item B2 through
// Caddy: a transform that feeds a payload number to BigInt.asUintN or a
// shift, as ordinary code does. Before, the first request ended the
// process ("fatal error: runtime: out of memory") and the shift built
// 500 MB and answered 200. Now each is answered 500 like any failed
// transform, the heap grows by well under 64 MiB, and the next request is
// served with the value computed.
func TestIntegrationTransformBigIntBombs(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{
		"mask.js":  `export default (ctx) => ({ message: "mask " + BigInt.asUintN(ctx.payload.bits, -1n).toString(16).length });`,
		"shift.js": `export default (ctx) => ({ message: "shift " + (1n << BigInt(ctx.payload.n)).toString(2).length });`,
	})
	hooks := "transforms_root " + root + "\n" + mappingLines("mask", "transform mask.js") + mappingLines("shift", "transform shift.js")
	in := startIngress(t, ingressOpts{hooks: hooks})
	for _, tc := range []struct{ id, attack, benign, want string }{
		{"mask", `{"bits": 1099511627776}`, `{"bits": 64}`, "mask 16"},
		{"shift", `{"n": 4000000000}`, `{"n": 100}`, "shift 101"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var r result
			grew := heapPeak(func() { r = in.post("/hooks/"+tc.id, tc.attack) })
			t.Logf("answered %d; heap +%d MiB", r.status, grew>>20)
			if r.status != 500 || r.json(t)["error"] != "hook transform failed: "+tc.id {
				t.Fatalf("%d %s, want 500 hook transform failed: %s", r.status, r.body, tc.id)
			}
			if grew >= 64<<20 {
				t.Fatalf("heap grew by %d MiB", grew>>20)
			}
			if r := in.post("/hooks/"+tc.id, tc.benign); r.status != 200 {
				t.Fatalf("the next request: %d %s", r.status, r.body)
			}
			if _, text, _ := lastAction(t, in); !strings.Contains(text, "\n"+tc.want+"\n") {
				t.Fatalf("gateway got %q, want it to carry %q", text, tc.want)
			}
		})
	}
}
