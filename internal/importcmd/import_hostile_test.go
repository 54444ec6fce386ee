package importcmd_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddyhook/caddyhook/caddyhook"
	"github.com/caddyhook/caddyhook/internal/importcmd"
)

// importInjectionAttacks are strings that try to end their token early in
// the generated Caddyfile and add config of their own: a route serving the
// gateway token, a second listener browsing /etc, a site, a snippet, an
// import, a global option, a heredoc, a comment that swallows the rest of
// the line. They are also seeds of FuzzImportToken.
var importInjectionAttacks = []string{
	// the report's attack: a backquote makes the old writer use double
	// quotes, and \" then closes them (the lexer reads \\ then an end
	// quote); the rest adds a public route serving the gateway token, a
	// listener browsing /etc, and a snippet that swallows what follows.
	// At a mapping id:
	"x`\\\" {\n\t\t\tforward\n\t\t}\n\t}\n\trespond /pwned {env.OPENCLAW_HOOKS_TOKEN} 200\n}\n:9999 {\n\tfile_server browse {\n\t\troot /etc\n\t}\n}\n(rest) {\n\ta {\n\t\tb { #",
	// at match.path or match.source:
	"x`\\\"\n\t\t\tforward\n\t\t}\n\t}\n\trespond /pwned {env.OPENCLAW_HOOKS_TOKEN} 200\n}\n:9999 {\n\tfile_server browse {\n\t\troot /etc\n\t}\n}\n(rest) {\n\ta {\n\t\tb { #",
	"x`\\\" {\n}\n}\n:9999 {\n\tfile_server browse\n}\nhttp://localhost:8083 {\n\trespond #",
	"trailing`\\",
	"`\\",
	"x }\n}\n:9999 {\n\tfile_server browse\n}\nx {",
	"x\n}\n}\n{\n\tdebug\n}\n:9999 {\n\tfile_server browse\n}\nhttp://localhost:8084 {\n\thooks {",
	"# comment",
	"a #b",
	"x\nimport /etc/passwd",
	"import",
	"(snippet) {\n\trespond pwned\n}",
	"<<EOF\nx\nEOF",
	"<<EOF",
	`a"b`,
	"a`b\"c\\\"d",
	`\`,
	"`",
	`"`,
	"{", "}", "{}",
	"line one\nline two",
	"END\nEND2 {",
	"a\x1b[2J\x1b[31mred",
	"\u202eevil",
	"a\x00b",
	"\r\n}\r\n",
	"\xff\xfe",
}

// importPlaceholderAttacks are strings that carry a placeholder into the
// generated file: {$VAR} (expanded by the Caddyfile adapter, quoted or
// not), {env.*} and {file.*} (expanded at run time) and shorthands.
var importPlaceholderAttacks = []string{
	"{$OPENCLAW_HOOKS_TOKEN}",
	"{$HOOK_TOKEN}",
	"{$NOPE:default}",
	"{$",
	"a{$b",
	"{env.OPENCLAW_HOOKS_TOKEN}",
	"{file./etc/passwd}",
	"hook:{file./etc/passwd}",
	"{path}",
	"{header.Authorization}",
	"{{path}}",
	"{http.request.header.Authorization}",
	"\\{env.HOOK_TOKEN\\}",
}

// importInjectionPoint puts a value where one config key of openclaw.json
// is copied into the generated file.
type importInjectionPoint struct {
	name  string
	modes []string
	build func(v string) map[string]any
}

// hostileBaseHooks is the hooks object every injection starts from.
func hostileBaseHooks() map[string]any {
	return map[string]any{
		"enabled": true, "token": "gateway-token", "allowRequestSessionKey": true,
		"allowedSessionKeyPrefixes": []any{"hook:"},
	}
}

// withHooks builds a config from the base hooks object and edit.
func withHooks(edit func(h map[string]any)) map[string]any {
	h := hostileBaseHooks()
	edit(h)
	return map[string]any{"hooks": h}
}

// oneMapping is a hooks.mappings list of one mapping.
func oneMapping(m map[string]any) []any {
	base := map[string]any{"id": "m", "match": map[string]any{"path": "p"}, "messageTemplate": "hello"}
	for k, v := range m {
		base[k] = v
	}
	return []any{base}
}

// importInjectionPoints are the keys the import copies into the file.
var importInjectionPoints = []importInjectionPoint{
	{"mapping id", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["mappings"] = oneMapping(map[string]any{"id": v}) })
	}},
	{"match.path", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["mappings"] = oneMapping(map[string]any{"match": map[string]any{"path": v}}) })
	}},
	{"match.source", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) {
			h["mappings"] = oneMapping(map[string]any{"match": map[string]any{"source": v}})
		})
	}},
	{"channels key", importModes, func(v string) map[string]any {
		c := withHooks(func(map[string]any) {})
		c["channels"] = map[string]any{v: map[string]any{}}
		return c
	}},
	{"agents.entries key", importModes, func(v string) map[string]any {
		c := withHooks(func(map[string]any) {})
		c["agents"] = map[string]any{"entries": map[string]any{v: map[string]any{}}}
		return c
	}},
	{"agents.list id", importModes, func(v string) map[string]any {
		c := withHooks(func(map[string]any) {})
		c["agents"] = map[string]any{"list": []any{map[string]any{"id": "main"}, map[string]any{"id": v, "default": true}}}
		return c
	}},
	{"allowedAgentIds", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["allowedAgentIds"] = []any{"main", v} })
	}},
	{"allowedSessionKeyPrefixes", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["allowedSessionKeyPrefixes"] = []any{"hook:", v} })
	}},
	{"defaultSessionKey", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["defaultSessionKey"] = "hook:" + v })
	}},
	{"messageTemplate", []string{importcmd.ModeRender}, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["mappings"] = oneMapping(map[string]any{"messageTemplate": v}) })
	}},
	{"sessionKey", []string{importcmd.ModeRender}, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["mappings"] = oneMapping(map[string]any{"sessionKey": "hook:" + v}) })
	}},
	{"wakeMode and forEach", []string{importcmd.ModeRender}, func(v string) map[string]any {
		return withHooks(func(h map[string]any) {
			h["mappings"] = oneMapping(map[string]any{"action": "wake", "textTemplate": "t", "wakeMode": v, "forEach": v})
		})
	}},
	{"transform module", []string{importcmd.ModeRender}, func(v string) map[string]any {
		return withHooks(func(h map[string]any) {
			h["mappings"] = oneMapping(map[string]any{"transform": map[string]any{"module": v, "export": v}})
		})
	}},
	{"transformsDir", []string{importcmd.ModeRender}, func(v string) map[string]any {
		return withHooks(func(h map[string]any) {
			h["transformsDir"] = v
			h["mappings"] = oneMapping(map[string]any{"transform": map[string]any{"module": "pr.js"}})
		})
	}},
	{"presets and unknown keys", importModes, func(v string) map[string]any {
		return withHooks(func(h map[string]any) { h["presets"] = []any{v}; h[v] = true })
	}},
}

// TestImportHostileValuesAddNoConfig is the regression test of the
// report's HIGH finding: a value in openclaw.json that ends its token
// early turned the import into a Caddyfile with a public route serving
// the gateway token and a second listener browsing /etc (exit status 0).
// Every injection point, every attack, both modes: the import either
// fails naming the key, or writes a file that adapts to exactly the
// structure of a benign config's, loads, and holds the value whole or not
// at all.
func TestImportHostileValuesAddNoConfig(t *testing.T) {
	checkHostileImports(t, importInjectionAttacks)
}

// TestImportValuesCarryNoPlaceholder is the regression test of the
// report's finding that imported values keep placeholders: a mapping id
// {$OPENCLAW_HOOKS_TOKEN} put the gateway token into replies, metrics and
// /config/, and a default session key hook:{file./etc/passwd} sent the
// file with every run. No string of the adapted config may hold a
// placeholder the importer did not write itself, or a secret.
func TestImportValuesCarryNoPlaceholder(t *testing.T) {
	checkHostileImports(t, importPlaceholderAttacks)
}

// checkHostileImports imports every attack at every injection point.
func checkHostileImports(t *testing.T, attacks []string) {
	t.Setenv(importcmd.HookTokenEnv, testHookToken)
	t.Setenv(importcmd.GatewayTokenEnv, testGatewayToken)
	dir := t.TempDir()
	file := dir + "/openclaw.json"
	loaded := map[string]error{}
	for _, p := range importInjectionPoints {
		for _, mode := range p.modes {
			benign := importAdapted(t, p.build("benign"), file, mode)
			if benign.err != nil {
				t.Fatalf("%s (%s): the benign config does not import: %v", p.name, mode, benign.err)
			}
			for _, attack := range attacks {
				got := importAdapted(t, p.build(attack), file, mode)
				name := fmt.Sprintf("%s (%s) %q", p.name, mode, attack)
				if got.err != nil {
					if got.importErr && (strings.Contains(got.err.Error(), "hooks.") || strings.Contains(got.err.Error(), "agents")) {
						continue // refused, naming the key
					}
					t.Errorf("%s: %v\n%s", name, got.err, got.caddyfile)
					continue
				}
				if got.outside != benign.outside {
					t.Errorf("%s: the config around the hooks handler differs from a benign import's:\n got %s\nwant %s\n%s", name, got.outside, benign.outside, got.caddyfile)
					continue
				}
				for path := range got.paths {
					if !benign.paths[path] {
						t.Errorf("%s: the hooks handler has %s, a benign import's has not", name, path)
					}
				}
				checkHostileStrings(t, name, attack, got, benign)
				if got.warning != "" {
					t.Errorf("%s: adapt warning: %s", name, got.warning)
				}
				err, seen := loaded[got.cfgJSON]
				if !seen {
					err = validateJSON(got.cfgJSON)
					loaded[got.cfgJSON] = err
				}
				if err != nil {
					t.Errorf("%s: the generated file does not load: %v\n%s", name, err, got.caddyfile)
				}
			}
		}
	}
}

// adaptedImport is one import, adapted.
type adaptedImport struct {
	caddyfile, cfgJSON string
	err                error
	importErr          bool            // err is the import's own refusal
	warning            string          // the adapter's warning, if any
	outside            string          // the config with the hooks handler replaced by a marker
	paths              map[string]bool // the hooks handler's key paths
	strs               map[string]string
}

// importAdapted imports cfg in mode and adapts the result with Caddy's
// Caddyfile adapter.
func importAdapted(t *testing.T, cfg map[string]any, file, mode string) adaptedImport {
	t.Helper()
	src, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := importGatewayConfig(src, file, importcmd.Options{Mode: mode})
	if err != nil {
		return adaptedImport{err: err, importErr: true}
	}
	a := adaptedImport{caddyfile: res.Caddyfile}
	cfgJSON, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(res.Caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		a.err = fmt.Errorf("adapt: %w", err)
		return a
	}
	for _, w := range warnings {
		a.warning = w.String()
	}
	a.cfgJSON = string(cfgJSON)
	raw, found := hooksHandlersIn(t, cfgJSON)
	if len(found) != 1 {
		a.err = fmt.Errorf("%d hooks handlers, want 1", len(found))
		return a
	}
	a.paths, a.strs = map[string]bool{}, map[string]string{}
	walkJSON(found[0], "", a.paths, a.strs)
	for k := range found[0] {
		delete(found[0], k)
	}
	found[0]["handler"] = "HOOKS"
	out, _ := json.Marshal(raw)
	a.outside = string(out)
	return a
}

// walkJSON records the key paths of v (array indices as []) and its
// string leaves by path (with indices).
func walkJSON(v any, path string, paths map[string]bool, strs map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			walkJSON(e, path+"."+k, paths, strs)
		}
	case []any:
		for i, e := range x {
			walkJSON(e, fmt.Sprintf("%s[%d]", path, i), paths, strs)
		}
	case string:
		strs[path] = x
	}
	paths[stripIndices(path)] = true
}

// stripIndices turns a.b[3].c into a.b[].c.
func stripIndices(p string) string {
	var b strings.Builder
	skip := false
	for _, r := range p {
		switch {
		case r == '[':
			b.WriteString("[]")
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// templateSpan matches a placeholder of a reference template, as the
// gateway finds them.
var templateSpan = regexp.MustCompile(`\{\{[^}]+\}\}`)

// importTemplateFields are the mapping fields that hold templates.
var importTemplateFields = []string{"name", "agent_id", "session_key", "message_template", "text_template", "channel", "to", "model", "thinking"}

// checkHostileStrings checks every string of the hostile import's hooks
// handler: no secret, no placeholder but the importer's own token
// placeholders, and each either a benign import's value or the attack
// whole (as the gateway normalises it), never a fragment of it.
func checkHostileStrings(t *testing.T, name, attack string, got, benign adaptedImport) {
	t.Helper()
	benignVals := map[string]bool{}
	for _, s := range benign.strs {
		benignVals[s] = true
	}
	whole := map[string]bool{"main": true} // the gateway's default agent id
	for _, v := range []string{attack, "hook:" + attack} {
		for _, f := range []func(string) string{strings.TrimSpace, func(s string) string { return strings.ToLower(strings.TrimSpace(s)) },
			func(s string) string { return strings.Trim(strings.TrimSpace(s), "/") },
			func(s string) string { id, _ := caddyhook.ImportEdge().AgentID(s); return id }} {
			whole[f(v)] = true
		}
	}
	for path, s := range got.strs {
		if strings.Contains(s, testGatewayToken) || strings.Contains(s, testHookToken) {
			t.Errorf("%s: %s holds a secret: %q", name, path, s)
		}
		switch path {
		case ".token", ".gateway_token":
			if s != "{env."+importcmd.HookTokenEnv+"}" && s != "{env."+importcmd.GatewayTokenEnv+"}" {
				t.Errorf("%s: %s = %q", name, path, s)
			}
			continue
		}
		text := s
		for _, f := range importTemplateFields {
			if strings.HasSuffix(path, "."+f) {
				text = templateSpan.ReplaceAllString(s, "")
			}
		}
		if keys := caddyPlaceholderKeys(text); len(keys) > 0 {
			t.Errorf("%s: %s = %q holds the placeholder(s) %q", name, path, s, keys)
		}
		if !benignVals[s] && !whole[s] && !strings.HasPrefix(s, "mapping-") {
			t.Errorf("%s: %s = %q is neither a benign import's value nor the input whole", name, path, s)
		}
	}
}

// caddyPlaceholderKeys lists the placeholders Caddy's replacer finds in s.
func caddyPlaceholderKeys(s string) []string {
	var keys []string
	repl := caddy.NewEmptyReplacer()
	repl.Map(func(key string) (any, bool) {
		keys = append(keys, key)
		return "", true
	})
	repl.ReplaceAll(s, "")
	return keys
}

// validateJSON provisions a whole adapted config without starting it.
func validateJSON(cfgJSON string) error {
	var full caddy.Config
	if err := json.Unmarshal([]byte(cfgJSON), &full); err != nil {
		return err
	}
	return caddy.Validate(&full)
}
