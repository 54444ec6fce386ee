package natscluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`nats nats://10.0.0.5:4222 {
		url nats://10.0.0.6:4222 nats://10.0.0.7:4222
		name hooks-prod
		replicas 3
		user hooks
		password {env.NATS_PASSWORD}
		tls {
			ca /etc/nats/ca.pem
			cert /etc/nats/client.pem
			key /etc/nats/client-key.pem
		}
		timeout 3s
		ack_wait 45s
		duplicate_window 2h
		signing_key {env.HOOKS_CLUSTER_KEY}
		signing_key {file./etc/caddyhook/old.key} {env.OLDER}
		clock_skew 500ms
		accept_unsealed_until 2026-12-01T00:00:00Z
	}`)
	var n NATS
	if err := n.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := Config{
		URLs: []string{"nats://10.0.0.5:4222", "nats://10.0.0.6:4222", "nats://10.0.0.7:4222"},
		Name: "hooks-prod", Replicas: 3, User: "hooks", Password: "{env.NATS_PASSWORD}",
		TLS:     &TLS{CA: "/etc/nats/ca.pem", Cert: "/etc/nats/client.pem", Key: "/etc/nats/client-key.pem"},
		Timeout: caddy.Duration(3 * time.Second), AckWait: caddy.Duration(45 * time.Second), DuplicateWindow: caddy.Duration(2 * time.Hour),
		SigningKeys: []string{"{env.HOOKS_CLUSTER_KEY}", "{file./etc/caddyhook/old.key}", "{env.OLDER}"},
		ClockSkew:   caddy.Duration(500 * time.Millisecond), AcceptUnsealedUntil: "2026-12-01T00:00:00Z",
	}
	got, _ := json.Marshal(n.Config)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("parsed\n %s\nwant\n %s", got, exp)
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats {\n bogus 1\n}", `unknown option "bogus"`},
		{"nats {\n replicas three\n}", "replicas"},
		{"nats {\n timeout soon\n}", "timeout"},
		{"nats {\n name\n}", "wrong argument count"},
		{"nats {\n tls {\n pin x\n }\n}", `tls: unknown option "pin"`},
		{"nats {\n url\n}", "wrong argument count"},
		{"nats {\n signing_key\n}", "wrong argument count"},
		{"nats {\n clock_skew later\n}", "clock_skew"},
		{"nats {\n accept_unsealed_until\n}", "wrong argument count"},
		{"nats {\n accept_unsealed_until 2026-12-01 00:00\n}", "wrong argument count"},
	} {
		var n NATS
		err := n.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Setenv("CADDYHOOK_UNIT_KEY", testSigningKey+"-from-env")
	creds := filepath.Join(t.TempDir(), "hooks.creds")
	if err := os.WriteFile(creds, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{Config{Name: "bad name"}, "name"},
		{Config{Replicas: 7}, "replicas 7"},
		{Config{Token: "t", User: "u", Password: "p"}, "use one of"},
		{Config{User: "u"}, "user and password"},
		{Config{TLS: &TLS{Cert: "c"}}, "cert and key"},
		{Config{Credentials: filepath.Join(t.TempDir(), "missing.creds")}, "credentials"},
		{Config{Credentials: creds}, ""},
		{Config{Timeout: -1}, "timeout"},
		{Config{SigningKeys: []string{}}, "signing_key: required"},
		{Config{SigningKeys: []string{"{env.CADDYHOOK_UNIT_UNSET_KEY}"}}, "signing_key: {env.CADDYHOOK_UNIT_UNSET_KEY} is empty: CADDYHOOK_UNIT_UNSET_KEY is not set"},
		{Config{SigningKeys: []string{testSigningKey, " "}}, "signing_key 2 of 2: required"},
		{Config{SigningKeys: []string{"0123456789"}}, "signing_key: key: too short (10 characters)"},
		{Config{SigningKeys: []string{testSigningKey, testSigningKey}}, "signing_key: key 2 of 2: the same as key 1"},
		{Config{SigningKeys: []string{"{env.CADDYHOOK_UNIT_KEY}"}}, ""},
		{Config{ClockSkew: -1}, "clock_skew"},
		{Config{ClockSkew: caddy.Duration(time.Hour)}, "clock_skew: 1h0m0s must be between 0 and 10m0s"},
		{Config{User: "u", Password: "{env.CADDYHOOK_UNIT_UNSET_PASSWORD}"}, "password: {env.CADDYHOOK_UNIT_UNSET_PASSWORD} is empty"},
		{Config{Token: "{env.CADDYHOOK_UNIT_UNSET_TOKEN}"}, "token: {env.CADDYHOOK_UNIT_UNSET_TOKEN} is empty"},
		{Config{AcceptUnsealedUntil: time.Now().Add(72 * time.Hour).Format(time.RFC3339)}, ""},
		{Config{AcceptUnsealedUntil: "2020-01-01T00:00:00Z"}, ""}, // passed: unsealed records are refused
		{Config{AcceptUnsealedUntil: "2026-12-01"}, "accept_unsealed_until: want an RFC 3339 time"},
		{Config{AcceptUnsealedUntil: "next week"}, "accept_unsealed_until: want an RFC 3339 time"},
		{Config{AcceptUnsealedUntil: time.Now().Add(40 * 24 * time.Hour).Format(time.RFC3339)}, "accept_unsealed_until: " +
			"" + time.Now().Add(40 * 24 * time.Hour).Format(time.RFC3339)[:10]},
	} {
		if tc.c.SigningKeys == nil {
			tc.c.SigningKeys = []string{testSigningKey}
		}
		err := tc.c.validate()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	c := Config{SigningKeys: []string{testSigningKey}}
	_ = c.validate()
	if len(c.URLs) != 1 || c.URLs[0] != defaultURL || c.Replicas != 1 || time.Duration(c.Timeout) != defaultTimeout ||
		time.Duration(c.ClockSkew) != cluster.DefaultClockSkew || c.keyring == nil {
		t.Errorf("defaults: %+v", c)
	}
}

func TestModuleLoadsFromJSON(t *testing.T) {
	mod, err := caddy.GetModule("http.handlers.hooks.cluster.nats")
	if err != nil {
		t.Fatal(err)
	}
	n, ok := mod.New().(*NATS)
	if !ok {
		t.Fatalf("module is %T", mod.New())
	}
	if err := json.Unmarshal([]byte(`{"urls":["nats://127.0.0.1:4222"],"name":"x","replicas":3,"timeout":"2s",
		"signing_keys":["{env.K}","{env.OLD}"],"clock_skew":"1s","accept_unsealed_until":"2026-12-01T00:00:00Z"}`), n); err != nil {
		t.Fatal(err)
	}
	if n.Name != "x" || n.Replicas != 3 || time.Duration(n.Timeout) != 2*time.Second ||
		len(n.SigningKeys) != 2 || n.SigningKeys[1] != "{env.OLD}" || time.Duration(n.ClockSkew) != time.Second ||
		n.AcceptUnsealedUntil != "2026-12-01T00:00:00Z" {
		t.Errorf("decoded %+v", n.Config)
	}
}

// TestEmptySecretsFailNamingTheVariable (issue 25 item 2): a credential
// written as a placeholder whose variable is unset fails provision naming
// the field and the variable, instead of connecting without it.
func TestEmptySecretsFailNamingTheVariable(t *testing.T) {
	const unset = "CADDYHOOK_NATS_UNIT_UNSET"
	t.Setenv(unset, "")
	os.Unsetenv(unset)
	ph := "{env." + unset + "}"
	for _, tc := range []struct {
		c     Config
		field string
	}{
		{Config{User: "hooks", Password: ph}, "password"},
		{Config{User: ph, Password: "p"}, "user"},
		{Config{Token: ph}, "token"},
		{Config{Credentials: ph}, "credentials"},
		{Config{NKey: ph}, "nkey"},
	} {
		err := tc.c.validate()
		want := "cluster nats: " + tc.field + ": " + ph + " is empty: " + unset + " is not set in Caddy's environment"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", tc.field, err, want)
		}
	}
}
