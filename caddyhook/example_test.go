package caddyhook

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestXcaddyJSONMatchesCaddyfileExample proves xcaddy.json is the same
// site as Caddyfile.example (regenerate it with
// `caddy adapt --config Caddyfile.example --pretty > xcaddy.json`).
func TestXcaddyJSONMatchesCaddyfileExample(t *testing.T) {
	cf, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(cf, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt Caddyfile.example: %v", err)
	}
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
