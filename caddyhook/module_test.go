package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddytls"

	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// Secrets of the unit tests (distinct from the integration tests' ones).
const (
	utHookToken    = "ut-hook-7d1e5c9b3a2f4e6d8c0b1a2f3e4d5c6b"
	utGatewayToken = "ut-gateway-1f2e3d4c5b6a79880a1b2c3d4e5f6a7b"
)

// provision provisions and validates h in a fresh Caddy context, as
// Caddy does, and registers its cleanup (which releases the shared
// lockout table and cache).
func provision(t testing.TB, h *Handler) error {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	err := h.Provision(ctx)
	t.Cleanup(func() { _ = h.Cleanup() })
	if err != nil {
		return err
	}
	return h.Validate()
}

// validHandler is a minimal configuration that provisions.
func validHandler() *Handler {
	return &Handler{Token: utHookToken, Gateway: "unix//tmp/caddyhook-unit-none.sock", GatewayToken: utGatewayToken}
}

// TestProvisionClusterErrors: cluster configs that cannot work are
// refused at provision, naming the field, before any engine is reached.
func TestProvisionClusterErrors(t *testing.T) {
	nats := json.RawMessage(`{"engine":"nats","urls":["nats://127.0.0.1:1"],"signing_keys":["` + itClusterKey + `"]}`)
	on, off := true, false
	for _, tc := range []struct {
		name string
		mod  func(h *Handler)
		want string
	}{
		{"spool cluster without engine", func(h *Handler) { h.Spool = &SpoolConfig{Cluster: true, Fallback: "reject"} }, "spool: cluster needs a cluster engine"},
		{"dir and cluster", func(h *Handler) {
			h.ClusterRaw, h.Spool = nats, &SpoolConfig{Cluster: true, Dir: "/tmp/x", Fallback: "reject"}
		}, "spool: dir and cluster exclude each other"},
		{"rate without count with cluster", func(h *Handler) {
			h.ClusterRaw, h.Spool = nats, &SpoolConfig{Cluster: true, Fallback: "reject", Rate: &SpoolRate{Interval: caddy.Duration(time.Second)}}
		}, "spool: rate: count 0 must be between 1 and"},
		{"no fallback", func(h *Handler) { h.ClusterRaw, h.Spool = nats, &SpoolConfig{Cluster: true} }, "spool: fallback: required"},
		{"deliver on without gateway", func(h *Handler) {
			h.Gateway, h.ClusterRaw, h.Spool = "", nats, &SpoolConfig{Cluster: true, Fallback: "reject", Deliver: &on}
		}, "spool: deliver on needs gateway"},
		{"no gateway without spool cluster", func(h *Handler) { h.Gateway, h.ClusterRaw = "", nats }, "gateway:"},
		{"deliver off on a local spool", func(h *Handler) { h.Spool = &SpoolConfig{Dir: t.TempDir(), Deliver: &off} }, "spool: deliver and fallback are options of spool cluster"},
		{"unknown engine", func(h *Handler) { h.ClusterRaw = json.RawMessage(`{"engine":"redis"}`) }, "http.handlers.hooks.cluster.redis"},
		{"engine field", func(h *Handler) { h.ClusterRaw = json.RawMessage(`{"engine":"nats","replicas":9}`) }, "replicas 9 must be between 1 and 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			tc.mod(h)
			err := provision(t, h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestProvisionErrors(t *testing.T) {
	neg := caddy.Duration(-time.Second)
	for _, tc := range []struct {
		name string
		mod  func(h *Handler)
		want string
	}{
		{"missing token", func(h *Handler) { h.Token = "" }, "token: required"},
		{"blank token", func(h *Handler) { h.Token = "   " }, "token: required"},
		{"unset env token", func(h *Handler) { h.Token = "{env.CADDYHOOK_UNIT_UNSET_TOKEN}" },
			"token: {env.CADDYHOOK_UNIT_UNSET_TOKEN} is empty: CADDYHOOK_UNIT_UNSET_TOKEN is not set in Caddy's environment"},
		{"missing token file", func(h *Handler) { h.Token = "{file./nonexistent/caddyhook-unit-token}" },
			"token: {file./nonexistent/caddyhook-unit-token} is empty: file /nonexistent/caddyhook-unit-token cannot be read (no such file or directory)"},
		{"second token unset", func(h *Handler) { h.Tokens = []string{"{env.CADDYHOOK_UNIT_UNSET_TOKEN}"} },
			"token 2 of 2: {env.CADDYHOOK_UNIT_UNSET_TOKEN} is empty: CADDYHOOK_UNIT_UNSET_TOKEN is not set"},
		{"second token short", func(h *Handler) { h.Tokens = []string{"0123456789abcdef"} }, "token 2 of 2: too short (16 characters)"},
		{"second token weak", func(h *Handler) { h.Tokens = []string{strings.Repeat("ab", 20)} }, "token 2 of 2: too weak"},
		{"tokens alike", func(h *Handler) { h.Tokens = []string{" " + h.Token} }, "token 2 of 2: the same as token 1"},
		{"second token equals gateway token", func(h *Handler) { h.Tokens = []string{h.GatewayToken} }, "token 2 of 2: must differ from gateway_token"},
		{"only tokens, one weak", func(h *Handler) { h.Token, h.Tokens = "", []string{utHookToken, "short"} }, "token 2 of 2: too short"},
		{"too many tokens", func(h *Handler) {
			for i := range 8 {
				h.Tokens = append(h.Tokens, fmt.Sprintf("%s-%d", utHookToken, i))
			}
		}, "token: at most 8 tokens (have 9)"},
		{"token header not a name", func(h *Handler) { h.TokenHeaders = []string{"x token"} }, `token_headers: "x token" is not a header name`},
		{"token header authorization", func(h *Handler) { h.TokenHeaders = []string{"authorization"} }, "token_headers: Authorization cannot carry the hook token"},
		{"auth failures over 255", func(h *Handler) { h.AuthFailures = &AuthFailures{Count: 256} }, "auth_failures: count 256 must be at most 255"},
		{"unauthenticated bodies negative", func(h *Handler) { h.UnauthenticatedBodies = &UnauthenticatedBodies{Max: -1} }, "unauthenticated_bodies: -1 must be between 1 and 65536"},
		{"unauthenticated bodies per address negative", func(h *Handler) { h.UnauthenticatedBodies = &UnauthenticatedBodies{PerAddress: -1} }, "unauthenticated_bodies: per_address -1 must be between 1 and 65536"},
		{"unauthenticated bodies per prefix too wide", func(h *Handler) {
			h.UnauthenticatedBodies = &UnauthenticatedBodies{PerPrefix: []PrefixCap{{Bits: 8, Max: 4}}}
		}, "unauthenticated_bodies: per_prefix: /8 must be between /16 and /127"},
		{"unauthenticated bodies per prefix zero", func(h *Handler) {
			h.UnauthenticatedBodies = &UnauthenticatedBodies{PerPrefix: []PrefixCap{{Bits: 48}}}
		}, "unauthenticated_bodies: per_prefix /48: 0 must be between 1 and 65536"},
		{"unauthenticated bodies per prefix twice", func(h *Handler) {
			h.UnauthenticatedBodies = &UnauthenticatedBodies{PerPrefix: []PrefixCap{{Bits: 40, Max: 4}, {Bits: 40, Max: 5}}}
		}, "unauthenticated_bodies: per_prefix: /40 given twice"},
		{"body_timeout negative", func(h *Handler) { h.BodyTimeout = neg }, "body_timeout: -1s must be between 1ms and 1h"},
		{"body_timeout over an hour", func(h *Handler) { h.BodyTimeout = caddy.Duration(2 * time.Hour) }, "body_timeout: 2h0m0s must be between 1ms and 1h"},
		{"short token", func(h *Handler) { h.Token = "0123456789abcdef0123456789abcde" }, "token: too short (31 characters)"},
		{"weak token", func(h *Handler) { h.Token = strings.Repeat("ab", 20) }, "token: too weak"},
		{"weak token seven symbols", func(h *Handler) { h.Token = strings.Repeat("abcdefg", 5) }, "token: too weak"},
		{"token equals gateway token", func(h *Handler) { h.GatewayToken = h.Token }, "token: must differ from gateway_token"},
		{"token equals gateway token after trim", func(h *Handler) { h.GatewayToken = " " + h.Token + " " }, "token: must differ from gateway_token"},
		{"path root", func(h *Handler) { h.Path = "/" }, "path: / is not allowed"},
		{"path slashes", func(h *Handler) { h.Path = "///" }, "path: / is not allowed"},
		{"path relative", func(h *Handler) { h.Path = "hooks" }, `path: "hooks" must start with /`},
		{"path with query", func(h *Handler) { h.Path = "/hooks?x" }, `path: "/hooks?x" must be a plain path`},
		{"path with placeholder", func(h *Handler) { h.Path = "/{x}" }, `path: "/{x}" must be a plain path`},
		{"gateway missing", func(h *Handler) { h.Gateway = "" }, "gateway: "},
		{"gateway public tcp", func(h *Handler) { h.Gateway = "192.0.2.10:8080" }, "gateway: \"192.0.2.10:8080\": a TCP gateway must be on loopback"},
		{"gateway hostname", func(h *Handler) { h.Gateway = "gateway.example:8080" }, "a TCP gateway must be on loopback"},
		{"gateway any address", func(h *Handler) { h.Gateway = "0.0.0.0:8080" }, "a TCP gateway must be on loopback"},
		{"gateway without port", func(h *Handler) { h.Gateway = "127.0.0.1" }, "gateway: \"127.0.0.1\": want unix//path.sock or a loopback host:port"},
		{"gateway empty port", func(h *Handler) { h.Gateway = "127.0.0.1:" }, "want unix//path.sock or a loopback host:port"},
		{"gateway unix without path", func(h *Handler) { h.Gateway = "unix/" }, "gateway: \"unix/\": want unix//absolute/path.sock"},
		{"gateway unix relative", func(h *Handler) { h.Gateway = "unix/gw.sock" }, "want unix//absolute/path.sock"},
		{"negative max_body", func(h *Handler) { h.MaxBody = -1 }, "max_body: -1 must be between 1 byte and 64 MiB"},
		{"max_body too large", func(h *Handler) { h.MaxBody = 65<<20 + 1 }, "max_body: 68157441 must be between 1 byte and 64 MiB"},
		{"negative gateway_timeout", func(h *Handler) { h.GatewayTimeout = neg }, "gateway_timeout: must be positive"},
		{"negative auth_failures count", func(h *Handler) { h.AuthFailures = &AuthFailures{Count: -1} }, "auth_failures: count and window must be positive"},
		{"negative auth_failures window", func(h *Handler) { h.AuthFailures = &AuthFailures{Window: neg} }, "auth_failures: count and window must be positive"},
		{"auth_failures window too short", func(h *Handler) {
			h.AuthFailures = &AuthFailures{Window: caddy.Duration(500 * time.Millisecond)}
		}, "auth_failures: window 500ms must be between 1s and 24h"},
		{"negative lockout", func(h *Handler) { h.Lockout = neg }, "lockout: must be between 0 and 24h"},
		{"lockout too long", func(h *Handler) { h.Lockout = caddy.Duration(25 * time.Hour) }, "lockout: must be between 0 and 24h"},
		{"ipv6_prefix negative", func(h *Handler) { h.IPv6Prefix = -64 }, "ipv6_prefix: -64 must be between 16 and 128"},
		{"ipv6_prefix too small", func(h *Handler) { h.IPv6Prefix = 8 }, "ipv6_prefix: 8 must be between 16 and 128"},
		{"ipv6_prefix too large", func(h *Handler) { h.IPv6Prefix = 129 }, "ipv6_prefix: 129 must be between 16 and 128"},
		{"lockout_table_size negative", func(h *Handler) { h.LockoutTableSize = -1 }, "lockout_table_size: -1 must be between"},
		{"lockout_table_size too small", func(h *Handler) { h.LockoutTableSize = 100 }, "lockout_table_size: 100 must be between"},
		{"negative idempotency_ttl", func(h *Handler) { h.IdempotencyTTL = neg }, "idempotency_ttl: must be positive"},
		{"default key violates prefixes", func(h *Handler) {
			h.AllowedSessionKeyPrefixes, h.DefaultSessionKey = []string{"hook:"}, "agent:main"
		}, "default_session_key: \"agent:main\" does not start with one of allowed_session_key_prefixes"},
		{"prefixes without hook and no default", func(h *Handler) { h.AllowedSessionKeyPrefixes = []string{"agent:"} },
			`allowed_session_key_prefixes: must include "hook:"`},
		{"empty agent", func(h *Handler) { h.Agents = []string{""} }, `agents: "" is not a usable agent id`},
		{"unusable agent", func(h *Handler) { h.Agents = []string{"!!"} }, `agents: "!!" is not a usable agent id`},
		{"bad mode", func(h *Handler) { h.Mode = "proxy" }, `mode: "proxy" must be render or forward`},
		{"bad wrap", func(h *Handler) { h.Wrap = "both" }, `wrap: "both" must be edge or gateway`},
		{"bad idempotency header", func(h *Handler) { h.IdempotencyHeaders = []string{"x key"} }, `idempotency_headers: "x key" is not a header name`},
		{"negative wait timeout", func(h *Handler) { h.GatewayWaitTimeout = neg }, "gateway_wait_timeout: must be positive"},
		{"wait timeout below gateway timeout", func(h *Handler) {
			h.GatewayWaitTimeout = caddy.Duration(time.Second)
		}, "gateway_wait_timeout: 1s must not be shorter than gateway_timeout (30s)"},
		{"bad model", func(h *Handler) { h.AllowedModels = []string{"openai/"} }, `allowed_models: "openai/": want provider/model or an alias`},
		{"empty channel", func(h *Handler) { h.Channels = []string{"sms", ""} }, "channels: empty channel name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			tc.mod(h)
			err := provision(t, h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Provision error = %v, want it to contain %q", err, tc.want)
			}
			if tok := strings.TrimSpace(h.Token); strings.Contains(err.Error(), utHookToken) || tok != "" && !verify.IsSecretPlaceholder(tok) && strings.Contains(err.Error(), tok) {
				t.Fatalf("error message leaks the token: %v", err)
			}
		})
	}
}

func TestProvisionDefaults(t *testing.T) {
	h := validHandler()
	if err := provision(t, h); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"base", h.base, "/hooks"},
		{"max_body", h.MaxBody, int64(256 << 10)},
		{"auth_failures", *h.AuthFailures, AuthFailures{Count: 20, Window: caddy.Duration(time.Minute)}},
		{"lockout", h.Lockout, caddy.Duration(0)},
		{"ipv6_prefix", h.IPv6Prefix, 64},
		{"lockout_table_size", h.LockoutTableSize, 1 << 21},
		{"idempotency_ttl", h.IdempotencyTTL, caddy.Duration(10 * time.Minute)},
		{"gateway_timeout", h.GatewayTimeout, caddy.Duration(30 * time.Second)},
		{"gateway_wait_timeout", h.GatewayWaitTimeout, caddy.Duration(10 * time.Minute)},
		{"mode", h.forward, false},
		{"wrap", h.wrapEdge, true},
		{"idempotency headers", strings.Join(h.idemHeaders, ","), "Idempotency-Key"},
		{"gateway network", h.gateway.addr, gatewayAddr{"unix", "/tmp/caddyhook-unit-none.sock"}},
		{"gateway prefix", h.gateway.prefix, "/hooks"},
		{"gateway auth", h.gateway.auth, "Bearer " + utGatewayToken},
		{"lockout policy", h.lockout.Policy(), lockout.Policy{MaxFailures: 20, Window: time.Minute, LockFor: time.Minute, V6Bits: 64, Slots: 1 << 21}},
		{"unauthenticated_bodies", fmt.Sprint(*h.UnauthenticatedBodies), fmt.Sprint(UnauthenticatedBodies{Max: 256, Timeout: caddy.Duration(10 * time.Second), PerAddress: 8,
			PerPrefix: []PrefixCap{{Bits: 48, Max: 32}, {Bits: 32, Max: 64}}})},
		{"body_timeout", h.BodyTimeout, caddy.Duration(time.Minute)},
		{"token headers", fmt.Sprint(h.tokens.headers), "[X-Service-Token]"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestProvisionAccepts(t *testing.T) {
	t.Setenv("CADDYHOOK_UNIT_TOKEN", "  "+utHookToken+"\n")
	for _, tc := range []struct {
		name  string
		mod   func(h *Handler)
		check func(t *testing.T, h *Handler)
	}{
		{"token from env, trimmed", func(h *Handler) { h.Token = "{env.CADDYHOOK_UNIT_TOKEN}" }, func(t *testing.T, h *Handler) {
			if !h.tokens.matches(utHookToken) {
				t.Error("env token not used")
			}
		}},
		{"several tokens, any authenticates", func(h *Handler) {
			h.Token, h.Tokens = "", []string{"{env.CADDYHOOK_UNIT_TOKEN}", utHookToken + "-next"}
		}, func(t *testing.T, h *Handler) {
			if !h.tokens.matches(utHookToken) || !h.tokens.matches(utHookToken+"-next") || h.tokens.matches(utGatewayToken) {
				t.Error("tokens not all accepted, or a foreign one accepted")
			}
		}},
		{"token headers canonical, x-service-token once", func(h *Handler) {
			h.TokenHeaders = []string{"x-openclaw-token", "X-Service-Token", " X-OpenClaw-Token "}
		}, func(t *testing.T, h *Handler) {
			if fmt.Sprint(h.tokens.headers) != "[X-Service-Token X-Openclaw-Token]" {
				t.Errorf("tokenHeaders = %v", h.tokens.headers)
			}
		}},
		{"trailing slash path", func(h *Handler) { h.Path = "/in/hooks/" }, func(t *testing.T, h *Handler) {
			if h.base != "/in/hooks" {
				t.Errorf("base = %q", h.base)
			}
		}},
		{"loopback tcp gateway", func(h *Handler) { h.Gateway = "127.0.0.1:18789" }, nil},
		{"ipv6 loopback gateway", func(h *Handler) { h.Gateway = "[::1]:18789" }, nil},
		{"localhost gateway", func(h *Handler) { h.Gateway = "localhost:18789" }, nil},
		{"no gateway token", func(h *Handler) { h.GatewayToken = "" }, func(t *testing.T, h *Handler) {
			if h.gateway.auth != "" {
				t.Errorf("auth = %q", h.gateway.auth)
			}
		}},
		{"ipv6_prefix bounds", func(h *Handler) { h.IPv6Prefix = 128 }, nil},
		{"lockout option", func(h *Handler) { h.Lockout = caddy.Duration(5 * time.Minute) }, func(t *testing.T, h *Handler) {
			if h.lockout.Policy().LockFor != 5*time.Minute {
				t.Errorf("lockFor = %v", h.lockout.Policy().LockFor)
			}
		}},
		{"auth_failures partial", func(h *Handler) { h.AuthFailures = &AuthFailures{Count: 5} }, func(t *testing.T, h *Handler) {
			if *h.AuthFailures != (AuthFailures{Count: 5, Window: caddy.Duration(time.Minute)}) {
				t.Errorf("auth_failures = %+v", *h.AuthFailures)
			}
		}},
		{"empty allowed_agent_ids kept as deny-all", func(h *Handler) { h.AllowedAgentIDs = &[]string{} }, func(t *testing.T, h *Handler) {
			if h.policy.allowedAgent == nil {
				t.Error("[] became any")
			}
		}},
		{"disabled needs nothing", func(h *Handler) { off := false; *h = Handler{Enabled: &off} }, func(t *testing.T, h *Handler) {
			if h.enabled || h.Validate() != nil {
				t.Error("disabled handler not inert")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := validHandler()
			tc.mod(h)
			if err := provision(t, h); err != nil {
				t.Fatalf("Provision: %v", err)
			}
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

// TestProvisionSharesState: two handlers with the same settings share one
// lockout table (a reload keeps the state); other settings do not.
func TestProvisionSharesState(t *testing.T) {
	a, b, c := validHandler(), validHandler(), validHandler()
	c.AuthFailures = &AuthFailures{Count: 5}
	for _, h := range []*Handler{a, b, c} {
		h.Path = "/shared-state-test"
		if err := provision(t, h); err != nil {
			t.Fatal(err)
		}
	}
	if a.lockout.Table != b.lockout.Table || a.idem.Cache != b.idem.Cache {
		t.Error("same settings, different state")
	}
	if a.lockout.Table == c.lockout.Table {
		t.Error("different lockout settings share a table")
	}
}

func TestValidateUnprovisioned(t *testing.T) {
	h := &Handler{enabled: true}
	if err := h.Validate(); err == nil {
		t.Fatal("unprovisioned handler validated")
	}
}

func TestSubPath(t *testing.T) {
	for _, tc := range []struct {
		path, base, sub string
		ok              bool
	}{
		{"/hooks/wake", "/hooks", "wake", true},
		{"/hooks/wake/", "/hooks", "wake", true},
		{"/hooks//agent", "/hooks", "agent", true},
		{"/hooks/gmail/x", "/hooks", "gmail/x", true},
		{"/hooks", "/hooks", "", true},
		{"/hooks/", "/hooks", "", true},
		{"/hooksx/wake", "/hooks", "", false},
		{"/other", "/hooks", "", false},
		{"/Hooks/wake", "/hooks", "", false},
		{"/in/hooks/wake", "/in/hooks", "wake", true},
	} {
		sub, ok := subPath(tc.path, tc.base)
		if sub != tc.sub || ok != tc.ok {
			t.Errorf("subPath(%q, %q) = %q, %v; want %q, %v", tc.path, tc.base, sub, ok, tc.sub, tc.ok)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{49*time.Second + time.Millisecond, "50"},
		{51600 * time.Millisecond, "52"},
		{59900 * time.Millisecond, "60"},
		{time.Minute, "60"},
		{time.Hour, "3600"},
	} {
		if got := retryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("retryAfterSeconds(%v) = %s, want %s", tc.d, got, tc.want)
		}
	}
}

// TestCleanupReleasesThePool: a handler that takes every kind of shared
// state (lockout table, idempotency cache, metrics, transform cache,
// spool, event log, admin registration) holds each through one helper,
// and Cleanup gives every one back: the values only it used leave the
// pool.
func TestCleanupReleasesThePool(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "t.js"), []byte(`export default function () { return null }`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(t, nil, func(h *Handler) {
		h.TransformsRoot = root
		h.Mappings = []Mapping{{ID: "m", MatchPath: "m", Transform: &TransformRef{Module: "t.js"}}}
		h.Spool = &SpoolConfig{Dir: t.TempDir()}
		h.Events = &EventsConfig{Dir: t.TempDir()}
	})
	keys := slices.Clone(h.held.keys)
	for _, prefix := range []string{lockoutPoolPrefix, idempotencyPoolPrefix, metricsPoolKey, transformsPoolKey, spoolPoolPrefix, eventsPoolPrefix, adminPoolPrefix} {
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, prefix) }) {
			t.Errorf("the handler holds nothing under %s: %q", prefix, keys)
		}
	}
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if len(h.held.keys) != 0 {
		t.Fatalf("still held after Cleanup: %q", h.held.keys)
	}
	for _, k := range keys {
		switch {
		case k == metricsPoolKey, k == transformsPoolKey:
			continue // process-wide: other tests' handlers may hold them
		}
		if _, ok := sharedPool.References(k); ok {
			t.Errorf("%s is still in the pool after Cleanup", k)
		}
	}
}

// TestOnlyHosts: provisioning warns of a plain-HTTP server whose every
// route matches on the host (a request for another host gets Caddy's
// empty 200: D28 of issue 35), and only of such a server.
func TestOnlyHosts(t *testing.T) {
	route := func(sets ...caddy.ModuleMap) caddyhttp.Route { return caddyhttp.Route{MatcherSetsRaw: sets} }
	host := func(h ...string) caddy.ModuleMap {
		b, _ := json.Marshal(h)
		return caddy.ModuleMap{"host": b}
	}
	path := caddy.ModuleMap{"path": json.RawMessage(`["/x"]`)}
	for _, tc := range []struct {
		name string
		srv  *caddyhttp.Server
		want []string
	}{
		{"host-matched site", &caddyhttp.Server{Routes: caddyhttp.RouteList{route(host("localhost"))}}, []string{"localhost"}},
		{"two host-matched sites", &caddyhttp.Server{Routes: caddyhttp.RouteList{route(host("a")), route(host("b", "c"))}}, []string{"a", "b", "c"}},
		{"host-less site", &caddyhttp.Server{Routes: caddyhttp.RouteList{route()}}, nil},
		{"a catch-all after a host", &caddyhttp.Server{Routes: caddyhttp.RouteList{route(host("a")), route(path)}}, nil},
		{"TLS", &caddyhttp.Server{Routes: caddyhttp.RouteList{route(host("a"))}, TLSConnPolicies: caddytls.ConnectionPolicies{{}}}, nil},
		{"no server", nil, nil},
	} {
		if got := onlyHosts(tc.srv); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
