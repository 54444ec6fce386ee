package importcmd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/importcmd"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// importConfigPool holds, per gateway config key, the values the
// generated configs of TestImportAcceptedConfigsLoad choose from: valid
// ones, ones the edge compiles differently, and ones it refuses (nil:
// the key is absent).
var importConfigPool = map[string][]any{
	"path":                      {nil, "/hooks", "ingest/", nil, "/a b"},
	"allowRequestSessionKey":    {nil, true, false},
	"allowedSessionKeyPrefixes": {nil, []any{}, []any{"hook:"}, []any{"agent:"}, []any{"hook:", "agent:"}, []any{"HOOK:x:"}},
	"defaultSessionKey":         {nil, "", "hook:d", "agent:main", "hook:{x}"},
	"allowedAgentIds":           {nil, []any{}, []any{"*"}, []any{"main"}, []any{"!!"}},
	"presets":                   {nil, []any{"gmail"}, []any{"gmail", "gmail"}, []any{"outlook"}},
	"transformsDir":             {nil, "github", "nope"},
}

// importMappingPool is the same for the fields of a mapping.
var importMappingPool = map[string][]any{
	"id":              {nil, "", "a", "a", "a-2", "gmail", "mapping-1", "x y"},
	"path":            {nil, "p", "wake", "gmail", "café", "caf%C3%A9", "a/b", "../x", "a%2Fb", "✓", "a b"},
	"source":          {nil, "s"},
	"action":          {nil, "wake", "agent", "other"},
	"wakeMode":        {nil, "now", "next-heartbeat", "later"},
	"messageTemplate": {nil, "", "m {{payload.x}}", "{{", "{{cel: 1}}"},
	"textTemplate":    {nil, "t"},
	"sessionKey":      {nil, "hook:s", "hook:{{payload.k}}", "agent:x", "{{key}}"},
	"sessionMode":     {nil, "persistent"},
	"forEach":         {nil, "items", "a.b"},
	"transform":       {nil, map[string]any{"module": "pr.js"}, map[string]any{"module": "pr.js", "export": "opened"}, map[string]any{"module": "missing.js"}, map[string]any{"module": "../x.js"}},
	"timeoutSeconds":  {nil, 5.0, 1.5, -1.0},
	"channel":         {nil, "telegram", "{{payload.c}}"},
	"deliver":         {nil, true, false},
}

// pick sets key of m to a random value of pool (or leaves it out).
func pick(r *rand.Rand, m map[string]any, pool map[string][]any, key string) {
	if v := pool[key][r.IntN(len(pool[key]))]; v != nil {
		m[key] = v
	}
}

// randomGatewayConfig builds one gateway config from the pools.
func randomGatewayConfig(r *rand.Rand) map[string]any {
	hooks := map[string]any{"enabled": true, "token": "gateway-token"}
	for key := range importConfigPool {
		pick(r, hooks, importConfigPool, key)
	}
	var mappings []any
	for n := r.IntN(5); n > 0; n-- {
		m := map[string]any{}
		for _, key := range []string{"id", "action", "wakeMode", "messageTemplate", "textTemplate", "sessionKey", "sessionMode", "forEach", "transform", "timeoutSeconds", "channel", "deliver"} {
			pick(r, m, importMappingPool, key)
		}
		match := map[string]any{}
		pick(r, match, importMappingPool, "path")
		pick(r, match, importMappingPool, "source")
		m["match"] = match
		mappings = append(mappings, m)
	}
	hooks["mappings"] = mappings
	cfg := map[string]any{"hooks": hooks, "channels": map[string]any{"telegram": map[string]any{}}}
	switch r.IntN(4) {
	case 1:
		cfg["agents"] = map[string]any{"entries": map[string]any{"main": map[string]any{}, "ops": map[string]any{}}}
	case 2:
		cfg["agents"] = map[string]any{"list": []any{map[string]any{"id": "main"}, map[string]any{"id": "Ops", "default": true}}}
	case 3:
		cfg["agents"] = map[string]any{"entries": map[string]any{"!!": map[string]any{}}}
	}
	return cfg
}

// TestImportAcceptedConfigsLoad is the regression test of the report's
// finding that render imports did not always load (a config with
// allowRequestSessionKey: false made a Caddyfile the edge refused): for
// 300 generated gateway configs, in both modes, the import either refuses
// the config naming a key, or writes a Caddyfile that Caddy adapts
// without a warning and provisions.
func TestImportAcceptedConfigsLoad(t *testing.T) {
	t.Setenv(importcmd.HookTokenEnv, testHookToken)
	t.Setenv(importcmd.GatewayTokenEnv, testGatewayToken)
	file, err := filepath.Abs(filepath.Join("testdata", "import", "generated.json5"))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(26, 4))
	loaded := 0
	for i := range 300 {
		cfg := randomGatewayConfig(r)
		src, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range importModes {
			name := fmt.Sprintf("config %d (%s) %s", i, mode, src)
			res, err := importGatewayConfig(src, file, importcmd.Options{Mode: mode})
			if err != nil {
				if !strings.Contains(err.Error(), "hooks.") && !strings.Contains(err.Error(), "hooks:") {
					t.Errorf("%s: refused without naming a key: %v", name, err)
				}
				continue
			}
			cfgJSON, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(res.Caddyfile), map[string]any{"filename": "Caddyfile"})
			if err != nil {
				t.Errorf("%s: adapt: %v\n%s", name, err, res.Caddyfile)
				continue
			}
			for _, w := range warnings {
				t.Errorf("%s: adapt warning: %s", name, w.String())
			}
			if err := validateJSON(string(cfgJSON)); err != nil {
				t.Errorf("%s: does not load: %v\n%s", name, err, res.Caddyfile)
				continue
			}
			loaded++
		}
	}
	t.Logf("%d of 600 imports loaded", loaded)
	if loaded < 300 {
		t.Fatalf("only %d of 600 imports loaded: the generated configs are mostly refused", loaded)
	}
}

// TestImportServesEveryHost (D28 of issue 35): a request whose Host the
// site address does not name (a tunnel or load balancer that rewrites
// Host) never gets Caddy's empty 200 from an imported config: each
// generated Caddyfile (testdata/import/*.Caddyfile, the site address at
// its default) runs, on a loopback port, and a hook request with a
// foreign Host reaches the hooks handler (401 without the token, 404 for
// an unknown name), as one for the site's own name does.
func TestImportServesEveryHost(t *testing.T) {
	t.Setenv(importcmd.HookTokenEnv, testHookToken)
	t.Setenv(importcmd.GatewayTokenEnv, testGatewayToken)
	testkit.UnsetEnv(t, importcmd.SiteEnv)
	files, err := filepath.Glob(filepath.Join("testdata", "import", "*.Caddyfile"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated Caddyfiles: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		abs, err := filepath.Abs(filepath.Dir(f)) // the goldens' $TESTDATA
		if err != nil {
			t.Fatal(err)
		}
		src = []byte(strings.ReplaceAll(string(src), "$TESTDATA", abs))
		cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": f})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// the generated file as it is, but its listener: loopback, a port
		// of the kernel's, no admin endpoint
		var cfg map[string]any
		if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
			t.Fatal(err)
		}
		cfg["admin"] = map[string]any{"disabled": true}
		servers := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)
		if len(servers) != 1 {
			t.Fatalf("%s: %d servers", f, len(servers))
		}
		var name string
		for n, s := range servers {
			name = n
			s.(map[string]any)["listen"] = []any{"127.0.0.1:0"}
		}
		data, _ := json.Marshal(cfg)
		if err := caddy.Load(data, true); err != nil {
			t.Fatalf("%s: load: %v", f, err)
		}
		app, err := caddy.ActiveContext().App("http")
		if err != nil {
			t.Fatal(err)
		}
		lns := app.(*caddyhttp.App).Servers[name].Listeners()
		if len(lns) == 0 {
			t.Fatalf("%s: no listener", f)
		}
		addr := lns[0].Addr().String()
		base := regexp.MustCompile(`(?m)^\thooks (/\S*) \{`).FindStringSubmatch(string(src))[1]
		for _, host := range []string{"localhost", "foreign.example", "tunnel-abc.trycloudflare.com"} {
			for _, tc := range []struct {
				path   string
				status int
			}{
				{base + "/wake", http.StatusUnauthorized},
				{"/elsewhere", http.StatusNotFound},
			} {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+tc.path, strings.NewReader(`{"text":"x"}`))
				req.Host = host
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || len(body) == 0 {
					t.Errorf("%s: Host %s, POST %s: %d %q, want %d with a body", filepath.Base(f), host, tc.path, resp.StatusCode, body, tc.status)
				}
			}
		}
	}
}
