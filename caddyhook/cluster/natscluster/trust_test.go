package natscluster

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnsWithoutCredentials (issue 20 item 3): provisioning an engine
// whose connection presents no credentials logs one warning naming the
// block; any kind of credentials silences it. Secrets written as literals
// are warned about by field, never shown.
func TestWarnsWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		warn bool
	}{
		{"none", Config{}, true},
		{"tls without a client cert", Config{TLS: &TLS{CA: "/ca.pem"}}, true},
		{"token", Config{Token: "{env.NATS_TOKEN}"}, false},
		{"user and password", Config{User: "hooks", Password: "{env.NATS_PASSWORD}"}, false},
		{"user in the url", Config{URLs: []string{"nats://hooks:{env.P}@10.0.0.5:4222"}}, false},
		{"nkey", Config{NKey: "/etc/nats/hooks.nk"}, false},
		{"creds", Config{Credentials: "/etc/nats/hooks.creds"}, false},
		{"client cert", Config{TLS: &TLS{Cert: "/c.pem", Key: "/k.pem"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			tc.c.SigningKeys = []string{"{env.HOOKS_CLUSTER_KEY}"}
			tc.c.warn(zap.New(core))
			got := logs.FilterMessageSnippet("presents no credentials").All()
			if tc.warn != (len(got) == 1) {
				t.Fatalf("warnings %v, want one: %v", logs.All(), tc.warn)
			}
			if tc.warn && got[0].ContextMap()["block"] != "cluster nats" {
				t.Errorf("warning fields %v: want block \"cluster nats\"", got[0].ContextMap())
			}
			if logs.Len() != len(got) {
				t.Errorf("other warnings: %v", logs.All())
			}
		})
	}

	core, logs := observer.New(zap.WarnLevel)
	c := Config{Token: "literal-nats-token", SigningKeys: []string{"{env.K}", testSigningKey}}
	c.warn(zap.New(core))
	var fields []string
	for _, e := range logs.All() {
		fields = append(fields, e.ContextMap()["field"].(string))
		for _, v := range e.ContextMap() {
			if s, _ := v.(string); strings.Contains(s, testSigningKey) || strings.Contains(s, "literal-nats-token") {
				t.Errorf("a secret was logged: %v", e.ContextMap())
			}
		}
	}
	if strings.Join(fields, ",") != "cluster nats: token,cluster nats: signing_key 2" {
		t.Errorf("literal secret warnings for %v, want the token and signing key 2", fields)
	}
}
