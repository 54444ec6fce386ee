package caddyhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddyhook/caddyhook/internal/importcmd"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// unsetEnv unsets name for the test (restored after it).
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "")
	os.Unsetenv(name)
}

// TestProvisionFailsOnEmptySecrets (issue 25 item 2): every secret
// written as a placeholder that expands to nothing fails provision naming
// the field and the placeholder's variable (or file), where an unset
// gateway_token used to provision and send no credentials at all.
func TestProvisionFailsOnEmptySecrets(t *testing.T) {
	const unset = "CADDYHOOK_UNIT_SECRET_UNSET"
	unsetEnv(t, unset)
	ph := "{env." + unset + "}"
	why := ph + " is empty: " + unset + " is not set in Caddy's environment"
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		mod  func(h *Handler)
		want string
	}{
		{"token", func(h *Handler) { h.Token = ph }, "token: " + why},
		{"second token", func(h *Handler) { h.Tokens = []string{ph} }, "token 2 of 2: " + why},
		{"gateway_token", func(h *Handler) { h.GatewayToken = ph }, "gateway_token: " + why},
		{"gateway_token file", func(h *Handler) { h.GatewayToken = "{file." + missing + "}" },
			"gateway_token: {file." + missing + "} is empty: file " + missing + " cannot be read (no such file or directory)"},
		{"verify secret", func(h *Handler) {
			h.Mappings = []Mapping{{ID: "gh", MatchPath: "github", MessageTemplate: "x",
				Verify: &verify.Config{Scheme: "github", Secrets: []string{"a-literal-secret-0123456789", ph}}}}
		}, "mapping gh: verify secret 2: " + why},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			tc.mod(h)
			err := provision(t, h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

// TestImportedConfigMissingTokenFailsValidate (issue 25 item 2): `caddy
// validate` (caddy.Validate, what the command runs) of an imported config
// whose gateway token variable is not set fails naming the variable,
// where it used to say the config is valid.
func TestImportedConfigMissingTokenFailsValidate(t *testing.T) {
	t.Setenv(importcmd.HookTokenEnv, utHookToken)
	unsetEnv(t, importcmd.GatewayTokenEnv)
	var out, notes bytes.Buffer
	if err := runImport(&out, &notes, filepath.Join("testdata", "import", "gmail.json5"), importcmd.Options{Mode: importcmd.ModeForward}); err != nil {
		t.Fatal(err)
	}
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(out.Bytes(), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	err = caddy.Validate(&cfg)
	want := "gateway_token: {env." + importcmd.GatewayTokenEnv + "} is empty: " + importcmd.GatewayTokenEnv + " is not set in Caddy's environment"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("validate: %v, want %q", err, want)
	}
}

// TestGatewayRefusalNamesNoOption (issue 25 item 2): when the gateway
// refuses the edge itself (its credentials, forwarded headers it does not
// trust, its own lockout), the sender gets a bare 502 that names nothing
// of the edge's configuration, in either mode, and the operator gets the
// status and a hint in the log.
func TestGatewayRefusalNamesNoOption(t *testing.T) {
	for _, mode := range []string{modeRender, modeForward} {
		t.Run(mode, func(t *testing.T) {
			in := startIngress(t, ingressOpts{hooks: "mode " + mode})
			for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusTooManyRequests} {
				in.gw.FailWith(func(string) int { return status })
				r := in.post("/hooks/agent", `{"message":"m"}`)
				if r.status != http.StatusBadGateway || r.body != `{"ok":false,"error":"gateway unavailable"}` {
					t.Errorf("gateway %d: %d %s, want 502 gateway unavailable", status, r.status, r.body)
				}
			}
			in.gw.FailWith(nil)
			lines := in.logLines("gateway dispatch failed")
			if len(lines) != 4 {
				t.Fatalf("%d dispatch failure lines, want 4: %v", len(lines), lines)
			}
			for _, l := range lines {
				if hint, _ := l["hint"].(string); !strings.Contains(hint, "gateway_token") {
					t.Errorf("log line without the operator's hint: %v", l)
				}
			}
		})
	}
}
