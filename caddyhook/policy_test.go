package caddyhook

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mustPolicy compiles pc or fails the test.
func mustPolicy(t testing.TB, pc policyConfig) *policy {
	t.Helper()
	p, err := newPolicy(pc)
	if err != nil {
		t.Fatalf("newPolicy: %v", err)
	}
	return p
}

// allowed returns a set allowed_agent_ids list.
func allowed(ids ...string) policyConfig {
	return policyConfig{AllowedAgentIDs: ids, AllowedAgentIDsSet: true}
}

func TestNewPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		pc   policyConfig
		want string // substring; "" means success
	}{
		{name: "empty", pc: policyConfig{}},
		{name: "empty agent id", pc: policyConfig{Agents: []string{"main", " "}}, want: `agents: " " is not a usable agent id`},
		{name: "prefixes without hook in forward mode", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"agent:"}, Forward: true}},
		{name: "empty prefix", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"hook:", " "}}, want: "allowed_session_key_prefixes: empty prefix"},
		{name: "prefixes without hook and no default",
			pc:   policyConfig{AllowedSessionKeyPrefixes: []string{"agent:"}},
			want: `allowed_session_key_prefixes: must include "hook:" when default_session_key is not set`},
		{name: "prefixes with hook upper-case", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"HOOK:"}}},
		{name: "prefixes with wider hook prefix", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"ho"}}},
		{name: "prefixes without hook but default given",
			pc: policyConfig{AllowedSessionKeyPrefixes: []string{"agent:"}, DefaultSessionKey: "agent:main"}},
		{name: "default violates prefixes",
			pc:   policyConfig{AllowedSessionKeyPrefixes: []string{"hook:"}, DefaultSessionKey: "agent:main"},
			want: `default_session_key: "agent:main" does not start with one of allowed_session_key_prefixes (hook:)`},
		{name: "default matches prefix ignoring case",
			pc: policyConfig{AllowedSessionKeyPrefixes: []string{"hook:"}, DefaultSessionKey: " Hook:Main "}},
		{name: "empty model", pc: policyConfig{AllowedModels: []string{"a/b", ""}}, want: "allowed_models: empty model"},
		{name: "empty channel", pc: policyConfig{Channels: []string{"slack", " "}}, want: "channels: empty channel name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newPolicy(tc.pc)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// policyCase is one request through Policy.Apply.
type policyCase struct {
	name    string
	pc      policyConfig
	in      string
	prep    func(*action) // adjusts the decoded action (e.g. a mapping's key source)
	wantErr string
	agentID string // resolved agentId ("" = not sent)
	key     string // resolved sessionKey; "generated" = hook:<uuid>
}

func runPolicyCases(t *testing.T, cases []policyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPolicy(t, tc.pc)
			a, err := p.decodeAgent(payload(t, tc.in))
			if err == nil {
				if tc.prep != nil {
					tc.prep(&a)
				}
				err = p.Apply(&a)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if a.AgentID != tc.agentID {
				t.Errorf("agentId = %q, want %q", a.AgentID, tc.agentID)
			}
			switch {
			case tc.key == "generated":
				if !generatedKey.MatchString(a.SessionKey) {
					t.Errorf("sessionKey = %q, want hook:<uuid>", a.SessionKey)
				}
			case a.SessionKey != tc.key:
				t.Errorf("sessionKey = %q, want %q", a.SessionKey, tc.key)
			}
		})
	}
}

func TestPolicyAgents(t *testing.T) {
	agents := func(pc policyConfig) policyConfig {
		pc.Agents, pc.DefaultSessionKey = []string{"main", "ops"}, "hook:d"
		return pc
	}
	noList := func(pc policyConfig) policyConfig { pc.DefaultSessionKey = "hook:d"; return pc }
	const denied = "agentId is not allowed by allowed_agent_ids"
	runPolicyCases(t, []policyCase{
		{name: "known agent", pc: agents(policyConfig{}), in: `{"message":"m","agentId":"ops"}`, agentID: "ops", key: "hook:d"},
		{name: "known agent case and space", pc: agents(policyConfig{}), in: `{"message":"m","agentId":" OPS "}`, agentID: "ops", key: "hook:d"},
		{name: "unknown falls back to default", pc: agents(policyConfig{}), in: `{"message":"m","agentId":"ghost"}`, agentID: "main", key: "hook:d"},
		{name: "omitted is default", pc: agents(policyConfig{}), in: `{"message":"m"}`, agentID: "main", key: "hook:d"},
		{name: "no list passes explicit id", pc: noList(policyConfig{}), in: `{"message":"m","agentId":"ghost"}`, agentID: "ghost", key: "hook:d"},
		{name: "no list omitted stays omitted", pc: noList(policyConfig{}), in: `{"message":"m"}`, agentID: "", key: "hook:d"},

		{name: "allowlist omitted: any", pc: agents(policyConfig{}), in: `{"message":"m","agentId":"ops"}`, agentID: "ops", key: "hook:d"},
		{name: "allowlist star: any", pc: agents(allowed("*")), in: `{"message":"m","agentId":"ops"}`, agentID: "ops", key: "hook:d"},
		{name: "allowlist star among others: any", pc: agents(allowed("main", "*")), in: `{"message":"m","agentId":"ops"}`, agentID: "ops", key: "hook:d"},
		{name: "empty allowlist denies explicit", pc: agents(allowed()), in: `{"message":"m","agentId":"ops"}`, wantErr: denied},
		{name: "empty allowlist denies explicit default", pc: agents(allowed()), in: `{"message":"m","agentId":"main"}`, wantErr: denied},
		{name: "empty allowlist denies effective default", pc: agents(allowed()), in: `{"message":"m"}`, wantErr: denied},
		{name: "empty allowlist without agent list", pc: noList(allowed()), in: `{"message":"m","agentId":"x"}`, wantErr: denied},
		{name: "listed agent allowed", pc: agents(allowed("ops")), in: `{"message":"m","agentId":"ops"}`, agentID: "ops", key: "hook:d"},
		{name: "allowlist compared normalised", pc: agents(allowed(" OPS ")), in: `{"message":"m","agentId":"Ops"}`, agentID: "ops", key: "hook:d"},
		{name: "unlisted agent denied", pc: agents(allowed("ops")), in: `{"message":"m","agentId":"main"}`, wantErr: denied},
		{name: "omitted checked as default agent", pc: agents(allowed("ops")), in: `{"message":"m"}`, wantErr: denied},
		{name: "unknown id cannot launder past allowlist", pc: agents(allowed("ghost")), in: `{"message":"m","agentId":"ghost"}`, wantErr: denied},
		{name: "unknown id allowed as default", pc: agents(allowed("main")), in: `{"message":"m","agentId":"ghost"}`, agentID: "main", key: "hook:d"},
		{name: "reference default without list", pc: noList(allowed("main")), in: `{"message":"m"}`, agentID: "", key: "hook:d"},
		{name: "reference default denied without list", pc: noList(allowed("ops")), in: `{"message":"m"}`, wantErr: denied},
	})
}

func TestPolicySessionKeys(t *testing.T) {
	const disabled = "sessionKey is disabled for externally supplied hook payload values; set allow_request_session_key to enable"
	allow := policyConfig{AllowRequestSessionKey: true}
	prefixed := policyConfig{AllowRequestSessionKey: true, AllowedSessionKeyPrefixes: []string{"hook:", "Agent:"}}
	operator := func(a *action) { a.keySource = keyOperator }
	runPolicyCases(t, []policyCase{
		{name: "request key disabled by default", pc: policyConfig{}, in: `{"message":"m","sessionKey":"hook:x"}`, wantErr: disabled},
		{name: "blank request key is no key", pc: policyConfig{}, in: `{"message":"m","sessionKey":"  "}`, key: "generated"},
		{name: "request key allowed", pc: allow, in: `{"message":"m","sessionKey":" anything "}`, key: "anything"},
		{name: "prefix matches", pc: prefixed, in: `{"message":"m","sessionKey":"hook:gh:1"}`, key: "hook:gh:1"},
		{name: "prefix case-insensitive", pc: prefixed, in: `{"message":"m","sessionKey":"HOOK:Gh"}`, key: "HOOK:Gh"},
		{name: "second prefix", pc: prefixed, in: `{"message":"m","sessionKey":"agent:main:x"}`, key: "agent:main:x"},
		{name: "prefix violated", pc: prefixed, in: `{"message":"m","sessionKey":"main"}`,
			wantErr: "sessionKey must start with one of: hook:, agent:"},
		{name: "prefix is not substring", pc: prefixed, in: `{"message":"m","sessionKey":"x-hook:1"}`,
			wantErr: "sessionKey must start with one of: hook:, agent:"},
		{name: "default key", pc: policyConfig{DefaultSessionKey: "hook:main"}, in: `{"message":"m"}`, key: "hook:main"},
		{name: "generated key", pc: policyConfig{}, in: `{"message":"m"}`, key: "generated"},
		{name: "generated key with prefixes", pc: prefixed, in: `{"message":"m"}`, key: "generated"},
		{name: "disabled check precedes prefix check", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"hook:"}},
			in: `{"message":"m","sessionKey":"other"}`, wantErr: disabled},
		{name: "operator key needs no request permission", pc: policyConfig{},
			in: `{"message":"m","sessionKey":"hook:static"}`, prep: operator, key: "hook:static"},
		{name: "operator key still checked against prefixes", pc: policyConfig{AllowedSessionKeyPrefixes: []string{"hook:"}},
			in: `{"message":"m","sessionKey":"agent:static"}`, prep: operator, wantErr: "sessionKey must start with one of: hook:"},
	})
}

func TestPolicyModelsAndChannels(t *testing.T) {
	models := policyConfig{AllowedModels: []string{"openai/gpt-5", "fast"}, DefaultSessionKey: "hook:d"}
	channels := policyConfig{Channels: []string{"SMS", "last"}, DefaultSessionKey: "hook:d"}
	runPolicyCases(t, []policyCase{
		{name: "no model list: any", pc: policyConfig{DefaultSessionKey: "hook:d"}, in: `{"message":"m","model":"x/y"}`, key: "hook:d"},
		{name: "listed model", pc: models, in: `{"message":"m","model":"openai/gpt-5"}`, key: "hook:d"},
		{name: "listed alias", pc: models, in: `{"message":"m","model":" fast "}`, key: "hook:d"},
		{name: "unlisted model", pc: models, in: `{"message":"m","model":"anthropic/x"}`, wantErr: "model is not allowed by allowed_models"},
		{name: "alias in any case, as the gateway", pc: models, in: `{"message":"m","model":"FAST"}`, key: "hook:d"},
		{name: "provider in any case", pc: models, in: `{"message":"m","model":"OpenAI/gpt-5"}`, key: "hook:d"},
		{name: "auth profile suffix", pc: models, in: `{"message":"m","model":"openai/gpt-5@work"}`, key: "hook:d"},
		{name: "bare name of a unique ref", pc: models, in: `{"message":"m","model":"gpt-5"}`, key: "hook:d"},
		{name: "date suffix is part of the name", pc: models, in: `{"message":"m","model":"openai/gpt-5@20250101"}`,
			wantErr: "model is not allowed by allowed_models"},
		{name: "no model with list", pc: models, in: `{"message":"m"}`, key: "hook:d"},
		{name: "default channel list", pc: policyConfig{DefaultSessionKey: "hook:d"}, in: `{"message":"m","channel":"msteams","to":"x"}`, key: "hook:d"},
		{name: "default channel list refuses", pc: policyConfig{DefaultSessionKey: "hook:d"}, in: `{"message":"m","channel":"irc","to":"x"}`,
			wantErr: "channel must be last|whatsapp|telegram|discord|slack|mattermost|signal|imessage|msteams"},
		{name: "custom channel list", pc: channels, in: `{"message":"m","channel":"sms","to":"+1"}`, key: "hook:d"},
		{name: "custom channel list refuses reference channel", pc: channels, in: `{"message":"m","channel":"slack","to":"+1"}`,
			wantErr: "channel must be sms|last"},
		{name: "omitted channel is fine", pc: channels, in: `{"message":"m"}`, key: "hook:d"},
	})
}

func TestPolicyWakeWithoutRouting(t *testing.T) {
	p := mustPolicy(t, policyConfig{AllowedModels: []string{"x"}, DefaultSessionKey: "hook:d"})
	a, err := decodeWake(payload(t, `{"text":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	before := a
	if err := p.Apply(&a); err != nil {
		t.Fatalf("wake refused: %v", err)
	}
	if a != before {
		t.Fatalf("wake changed: %+v -> %+v", before, a)
	}
}

// TestDefaultSessionKeyExpandsNoPlaceholder is the regression test of the
// report's finding that default_session_key expanded {file.*} and {env.*}
// at provision: hook:{file./etc/passwd} sent the file with every run. The
// key is used as written, so a placeholder in it is refused, naming the
// option and never showing what it would have expanded to.
func TestDefaultSessionKeyExpandsNoPlaceholder(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("file-content-never-sent"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CADDYHOOK_TEST_SESSION_SECRET", "env-value-never-sent")
	for _, key := range []string{"hook:{file." + secretFile + "}", "hook:{env.CADDYHOOK_TEST_SESSION_SECRET}", "{env.CADDYHOOK_TEST_SESSION_SECRET}", "hook:{x}", "hook:}"} {
		h := validHandler()
		h.DefaultSessionKey = key
		err := provision(t, h)
		if err == nil || !strings.Contains(err.Error(), "default_session_key") {
			key := ""
			if h.policy != nil {
				key = h.policy.defaultKey
			}
			t.Errorf("default_session_key %q: provision error %v (the edge's default key is %q), want a refusal naming default_session_key", h.DefaultSessionKey, err, key)
			continue
		}
		if strings.Contains(err.Error(), "never-sent") {
			t.Errorf("the error shows the expansion: %v", err)
		}
	}
}

func TestDecodeAgentFieldRules(t *testing.T) {
	type want struct {
		message  string
		name     string
		deliver  bool
		wakeMode string
		channel  string
		to       string
		model    string
		thinking string
		timeout  int64
		set      uint16 // bits that must be set
		unset    uint16 // bits that must not be set
	}
	def := want{name: "Hook", deliver: true, wakeMode: "now"}
	with := func(f func(*want)) want { w := def; f(&w); return w }
	for _, tc := range []struct {
		name    string
		in      string
		wantErr string
		want    want
	}{
		{name: "defaults", in: `{"message":" hi "}`,
			want: with(func(w *want) {
				w.message = "hi"
				w.unset = setName | setDeliver | setChannel | setWakeMode | setModel | setTimeout
			})},
		{name: "missing message", in: `{}`, wantErr: "message required"},
		{name: "blank message", in: `{"message":"  \n "}`, wantErr: "message required"},
		{name: "non-string message", in: `{"message":["hi"]}`, wantErr: "message required"},
		{name: "text is not message", in: `{"text":"hi"}`, wantErr: "message required"},

		{name: "name trimmed", in: `{"message":"m","name":"  GitHub "}`,
			want: with(func(w *want) { w.message, w.name, w.set = "m", "GitHub", setName })},
		{name: "blank name defaults", in: `{"message":"m","name":"   "}`,
			want: with(func(w *want) { w.message, w.unset = "m", setName })},
		{name: "non-string name defaults", in: `{"message":"m","name":5}`,
			want: with(func(w *want) { w.message, w.unset = "m", setName })},

		{name: "deliver false", in: `{"message":"m","deliver":false}`,
			want: with(func(w *want) { w.message, w.deliver, w.set = "m", false, setDeliver })},
		{name: "deliver true explicit", in: `{"message":"m","deliver":true}`,
			want: with(func(w *want) { w.message, w.set = "m", setDeliver })},
		{name: "deliver string false is true", in: `{"message":"m","deliver":"false"}`,
			want: with(func(w *want) { w.message, w.unset = "m", setDeliver })},
		{name: "deliver 0 is true", in: `{"message":"m","deliver":0}`,
			want: with(func(w *want) { w.message, w.unset = "m", setDeliver })},
		{name: "deliver null is true", in: `{"message":"m","deliver":null}`,
			want: with(func(w *want) { w.message, w.unset = "m", setDeliver })},

		{name: "channel lower-cased", in: `{"message":"m","channel":" Slack ","to":"C1"}`,
			want: with(func(w *want) { w.message, w.channel, w.to, w.set = "m", "slack", "C1", setChannel|setTo })},

		{name: "to trimmed", in: `{"message":"m","channel":"signal","to":" +15550100 "}`,
			want: with(func(w *want) { w.message, w.channel, w.to, w.set = "m", "signal", "+15550100", setTo })},
		{name: "thinking", in: `{"message":"m","thinking":"high"}`,
			want: with(func(w *want) { w.message, w.thinking, w.set = "m", "high", setThinking })},

		{name: "model trimmed", in: `{"message":"m","model":" openai/gpt-5 "}`,
			want: with(func(w *want) { w.message, w.model, w.set = "m", "openai/gpt-5", setModel })},
		{name: "model empty", in: `{"message":"m","model":""}`, wantErr: "model required"},
		{name: "model blank", in: `{"message":"m","model":"  "}`, wantErr: "model required"},
		{name: "model number", in: `{"message":"m","model":4}`, wantErr: "model required"},
		{name: "model object", in: `{"message":"m","model":{}}`, wantErr: "model required"},

		{name: "timeout integer", in: `{"message":"m","timeoutSeconds":30}`,
			want: with(func(w *want) { w.message, w.timeout, w.set = "m", 30, setTimeout })},
		{name: "timeout floored", in: `{"message":"m","timeoutSeconds":30.9}`,
			want: with(func(w *want) { w.message, w.timeout, w.set = "m", 30, setTimeout })},
		{name: "timeout below one floors to zero", in: `{"message":"m","timeoutSeconds":0.5}`,
			want: with(func(w *want) { w.message, w.timeout, w.set = "m", 0, setTimeout })},
		{name: "timeout huge clamped", in: `{"message":"m","timeoutSeconds":1e300}`,
			want: with(func(w *want) { w.message, w.timeout, w.set = "m", math.MaxInt32, setTimeout })},
		{name: "timeout zero ignored", in: `{"message":"m","timeoutSeconds":0}`,
			want: with(func(w *want) { w.message, w.unset = "m", setTimeout })},
		{name: "timeout negative ignored", in: `{"message":"m","timeoutSeconds":-5}`,
			want: with(func(w *want) { w.message, w.unset = "m", setTimeout })},
		{name: "timeout string ignored", in: `{"message":"m","timeoutSeconds":"30"}`,
			want: with(func(w *want) { w.message, w.unset = "m", setTimeout })},

		{name: "wakeMode next-heartbeat", in: `{"message":"m","wakeMode":"next-heartbeat"}`,
			want: with(func(w *want) { w.message, w.wakeMode, w.set = "m", "next-heartbeat", setWakeMode })},
		{name: "wakeMode other is now", in: `{"message":"m","wakeMode":"whenever"}`,
			want: with(func(w *want) { w.message, w.set = "m", setWakeMode })},
		{name: "wakeMode non-string ignored", in: `{"message":"m","wakeMode":true}`,
			want: with(func(w *want) { w.message, w.unset = "m", setWakeMode })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := decodeAgent(payload(t, tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			w := tc.want
			if a.Kind != kindAgent || a.Message != w.message || a.Name != w.name || a.Deliver != w.deliver ||
				a.WakeMode != w.wakeMode || a.Channel != w.channel || a.To != w.to || a.Model != w.model ||
				a.Thinking != w.thinking || a.TimeoutSeconds != w.timeout {
				t.Fatalf("got %+v, want %+v", a, w)
			}
			if a.set&w.set != w.set {
				t.Errorf("set bits %b missing from %b", w.set, a.set)
			}
			if a.set&w.unset != 0 {
				t.Errorf("bits %b unexpectedly set in %b", w.unset, a.set)
			}
		})
	}
}

// TestDecodeAgentPresentButInvalid covers fields that the reference
// gateway rejects when present with an unusable value, rather than
// treating them as absent.
func TestDecodeAgentPresentButInvalid(t *testing.T) {
	pol := mustPolicy(t, policyConfig{DefaultSessionKey: "hook:ingress"})
	chErr := "channel must be last|whatsapp|telegram|discord|slack|mattermost|signal|imessage|msteams"
	for _, tc := range []struct{ name, in, want string }{
		{"model null", `{"message":"m","model":null}`, "model required"},
		{"channel empty", `{"message":"m","channel":""}`, chErr},
		{"channel blank", `{"message":"m","channel":"  "}`, chErr},
		{"channel number", `{"message":"m","channel":3}`, chErr},
		{"channel null", `{"message":"m","channel":null}`, chErr},
		{"channel unknown", `{"message":"m","channel":"sms"}`, chErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := decodeAgent(payload(t, tc.in))
			if err == nil {
				err = pol.Apply(&a)
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDecodeAgentNonJSONNumbers covers values only a mapping or transform
// can produce.
func TestDecodeAgentNonJSONNumbers(t *testing.T) {
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		a, err := decodeAgent(fields{"message": "m", "timeoutSeconds": v})
		if err != nil {
			t.Fatal(err)
		}
		if a.has(setTimeout) {
			t.Errorf("timeoutSeconds %v accepted as %d", v, a.TimeoutSeconds)
		}
	}
}

// TestPolicyGatewayReasons: in forward mode a refusal that names a config
// key names the gateway's (the sender reads what the gateway would have
// answered: D17 of issue 35); in render mode the edge's option.
func TestPolicyGatewayReasons(t *testing.T) {
	fwd := func(pc policyConfig) policyConfig { pc.Forward = true; return pc }
	runPolicyCases(t, []policyCase{
		{name: "agent, forward", pc: fwd(allowed("ops")), in: `{"message":"m","agentId":"main"}`, wantErr: "agentId is not allowed by hooks.allowedAgentIds"},
		{name: "agent, render", pc: allowed("ops"), in: `{"message":"m","agentId":"main"}`, wantErr: "agentId is not allowed by allowed_agent_ids"},
		{name: "session key, forward", pc: fwd(policyConfig{}), in: `{"message":"m","sessionKey":"hook:x"}`,
			wantErr: "sessionKey is disabled for externally supplied hook payload values; set hooks.allowRequestSessionKey=true to enable"},
		{name: "session key, render", pc: policyConfig{}, in: `{"message":"m","sessionKey":"hook:x"}`,
			wantErr: "sessionKey is disabled for externally supplied hook payload values; set allow_request_session_key to enable"},
	})
}
