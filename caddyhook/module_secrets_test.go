package caddyhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddyhook/caddyhook/internal/testkit"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// TestProvisionFailsOnEmptySecrets (issue 25 item 2): every secret
// written as a placeholder that expands to nothing fails provision naming
// the field and the placeholder's variable (or file), where an unset
// gateway_token used to provision and send no credentials at all.
func TestProvisionFailsOnEmptySecrets(t *testing.T) {
	const unset = "CADDYHOOK_UNIT_SECRET_UNSET"
	testkit.UnsetEnv(t, unset)
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
		{"verify verify_token", func(h *Handler) {
			h.Mappings = []Mapping{{ID: "wa", MatchPath: "wa",
				Verify: &verify.Config{Scheme: "meta", Secrets: []string{"a-literal-secret-0123456789"}, VerifyToken: ph}}}
		}, "mapping wa: verify verify_token: " + why},
		{"verify client_state", func(h *Handler) {
			h.Mappings = []Mapping{{ID: "graph", MatchPath: "graph", Verify: &verify.Config{Scheme: "msgraph", ClientState: ph}}}
		}, "mapping graph: verify client_state: " + why},
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

// TestIntegrationLiteralSecretsWarned (issue 17 item 14): one rule for all
// secrets: a literal token, gateway token or verify secret is accepted
// with a warning naming the field (never the value); placeholders are not
// warned about.
func TestIntegrationLiteralSecretsWarned(t *testing.T) {
	t.Setenv("CH_IT_META_SECRET", pvMetaSecret)
	in := startIngress(t, ingressOpts{hooks: `mapping gh {
			match_path gh
			message_template "x"
			verify github {
				secret it-literal-github-secret-0123456789
			}
		}
		mapping wa {
			match_path wa
			verify meta {
				secret {env.CH_IT_META_SECRET}
				verify_token it-literal-verify-token-0123
			}
		}`})
	var logs string
	for deadline := time.Now().Add(answerWithin); ; {
		logs = in.logs()
		if strings.Count(logs, "secret written into the config") >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, field := range []string{`"field":"token"`, `"field":"gateway_token"`, `"field":"mapping gh: verify secret 1"`, `"field":"mapping wa: verify verify_token"`} {
		if !strings.Contains(logs, field) {
			t.Errorf("no literal-secret warning for %s", field)
		}
	}
	for _, s := range []string{itHookToken, itGatewayToken, "it-literal-github-secret-0123456789", "it-literal-verify-token-0123"} {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds a secret (%s…)", s[:10])
		}
	}
	t.Setenv("CH_IT_TOKEN", itHookToken)
	t.Setenv("CH_IT_GW_TOKEN", itGatewayToken)
	before := strings.Count(in.logs(), "secret written into the config")
	cf := strings.NewReplacer("token "+itHookToken, "token {env.CH_IT_TOKEN}", "gateway_token "+itGatewayToken, "gateway_token {env.CH_IT_GW_TOKEN}").
		Replace(in.siteCaddyfile("", "http://"+in.hostPort(), ""))
	in.reloadTo(cf, nil)
	if r := in.post("/hooks/wake", `{"text":"x"}`); r.status != 200 {
		t.Fatalf("placeholder tokens: %d %s", r.status, r.body)
	}
	if after := strings.Count(in.logs(), "secret written into the config"); after != before {
		t.Fatalf("placeholders warned about (%d new warnings)", after-before)
	}
}

// TestValidateNamesEveryUnsetVariable (issue 31 item 6): `caddy validate`
// of Caddyfile.example, then of a cluster edge, with nothing set names
// every variable the config needs in one error, each with its field (it
// named one per run).
func TestValidateNamesEveryUnsetVariable(t *testing.T) {
	vars := []string{"HOOK_TOKEN", "GATEWAY_TOKEN", "GATEWAY_SOCKET", "GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET", "CADDYHOOK_UNIT_CLUSTER_KEY", "CADDYHOOK_UNIT_NATS_PASSWORD"}
	for _, v := range vars {
		testkit.UnsetEnv(t, v)
	}
	cf, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	cluster := strings.Replace(string(cf), "\ttoken {env.HOOK_TOKEN}\n", "\ttoken {env.HOOK_TOKEN}\n\t\tcluster nats nats://127.0.0.1:1 {\n\t\t\tsigning_key {env.CADDYHOOK_UNIT_CLUSTER_KEY}\n"+
		"\t\t\tuser edge\n\t\t\tpassword {env.CADDYHOOK_UNIT_NATS_PASSWORD}\n\t\t}\n", 1)
	if cluster == string(cf) {
		t.Fatal("Caddyfile.example has no `token {env.HOOK_TOKEN}` line to put the cluster after")
	}
	for _, tc := range []struct {
		name, cf string
		want     []string
	}{
		{"Caddyfile.example", string(cf), []string{"7 values are empty: token: {env.HOOK_TOKEN}, gateway_token: {env.GATEWAY_TOKEN}, " +
			"gateway: {env.GATEWAY_SOCKET}, mapping github-pr: verify secret 1: {env.GITHUB_WEBHOOK_SECRET}, " +
			"mapping github-push: verify secret 1: {env.GITHUB_WEBHOOK_SECRET}, mapping github-issues: verify secret 1: {env.GITHUB_WEBHOOK_SECRET}, " +
			"mapping stripe: verify secret 1: {env.STRIPE_WEBHOOK_SECRET}; " +
			"HOOK_TOKEN, GATEWAY_TOKEN, GATEWAY_SOCKET, GITHUB_WEBHOOK_SECRET and STRIPE_WEBHOOK_SECRET are not set in Caddy's environment (Caddy reads"}},
		{"a cluster edge", cluster, []string{"9 values are empty: token: {env.HOOK_TOKEN}",
			"cluster nats: password: {env.CADDYHOOK_UNIT_NATS_PASSWORD}, cluster nats: signing_key: {env.CADDYHOOK_UNIT_CLUSTER_KEY}; ",
			"STRIPE_WEBHOOK_SECRET, CADDYHOOK_UNIT_NATS_PASSWORD and CADDYHOOK_UNIT_CLUSTER_KEY are not set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(tc.cf), map[string]any{"filename": "../Caddyfile.example"})
			if err != nil {
				t.Fatal(err)
			}
			err = caddy.Validate(mustConfig(t, cfg))
			if err == nil {
				t.Fatal("validated")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "Caddy reads its environment when it starts"); n != 1 {
				t.Errorf("the environment's hint %d times, want once:\n%v", n, err)
			}
		})
	}
}

// mustConfig decodes a JSON config for caddy.Validate.
func mustConfig(t *testing.T, b []byte) *caddy.Config {
	t.Helper()
	var cfg caddy.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return &cfg
}
