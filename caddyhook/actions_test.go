package caddyhook

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"testing"
)

// testPolicy is a policy with the default channel list.
var testPolicy = func() *policy {
	p, err := newPolicy(policyConfig{})
	if err != nil {
		panic(err)
	}
	return p
}()

// decodeAgent decodes f with testPolicy's channel list.
func decodeAgent(f fields) (action, error) { return testPolicy.decodeAgent(f) }

// payload decodes a JSON object literal the way the request path does.
func payload(t testing.TB, s string) fields {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test payload %s: %v", s, err)
	}
	return m
}

func TestNormalizeMode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"next-heartbeat", modeNextHeartbeat},
		{" next-heartbeat\t", modeNow}, // the gateway compares exactly
		{"now", modeNow},
		{"", modeNow},
		{"NEXT-HEARTBEAT", modeNow},
		{"next_heartbeat", modeNow},
		{"later", modeNow},
	} {
		if got := normalizeMode(tc.in); got != tc.want {
			t.Errorf("normalizeMode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDecodeWake(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		wantErr  error
		wantText string
		wantMode string
		wantBody string
	}{
		{name: "text trimmed", in: `{"text":"  disk full \n"}`, wantText: "disk full", wantMode: "now",
			wantBody: `{"text":"disk full","mode":"now"}`},
		{name: "next-heartbeat", in: `{"text":"x","mode":"next-heartbeat"}`, wantText: "x", wantMode: "next-heartbeat",
			wantBody: `{"text":"x","mode":"next-heartbeat"}`},
		{name: "unknown mode is now", in: `{"text":"x","mode":"soon"}`, wantText: "x", wantMode: "now",
			wantBody: `{"text":"x","mode":"now"}`},
		{name: "non-string mode ignored", in: `{"text":"x","mode":7}`, wantText: "x", wantMode: "now",
			wantBody: `{"text":"x","mode":"now"}`},
		{name: "empty object", in: `{}`, wantErr: errTextRequired},
		{name: "blank text", in: `{"text":" \t\n"}`, wantErr: errTextRequired},
		{name: "non-string text", in: `{"text":42}`, wantErr: errTextRequired},
		{name: "null text", in: `{"text":null}`, wantErr: errTextRequired},
		{name: "message is not text", in: `{"message":"hi"}`, wantErr: errTextRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := decodeWake(payload(t, tc.in))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if err.Error() != "text required" {
					t.Fatalf("reason = %q", err.Error())
				}
				return
			}
			if a.Kind != kindWake || a.Text != tc.wantText || a.Mode != tc.wantMode {
				t.Fatalf("got kind=%v text=%q mode=%q", a.Kind, a.Text, a.Mode)
			}
			if got := string(a.appendGatewayBody(nil)); got != tc.wantBody {
				t.Fatalf("body = %s, want %s", got, tc.wantBody)
			}
		})
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

func TestAgentGatewayBody(t *testing.T) {
	full := policyConfig{
		Agents: []string{"main", "ops"}, AllowRequestSessionKey: true,
		AllowedSessionKeyPrefixes: []string{"hook:"}, DefaultSessionKey: "hook:ingress",
	}
	for _, tc := range []struct {
		name string
		pc   policyConfig
		in   string
		want string
	}{
		{name: "minimal: only resolved session key",
			pc: policyConfig{DefaultSessionKey: "hook:ingress"}, in: `{"message":"hi"}`,
			want: `{"message":"hi","sessionKey":"hook:ingress"}`},
		{name: "agent list adds effective agent",
			pc: full, in: `{"message":"hi"}`,
			want: `{"message":"hi","agentId":"main","sessionKey":"hook:ingress"}`},
		{name: "unknown agent falls back",
			pc: full, in: `{"message":"hi","agentId":"Ghost"}`,
			want: `{"message":"hi","agentId":"main","sessionKey":"hook:ingress"}`},
		{name: "explicit agent without list passes normalised",
			pc: policyConfig{DefaultSessionKey: "hook:ingress"}, in: `{"message":"hi","agentId":" Ops "}`,
			want: `{"message":"hi","agentId":"ops","sessionKey":"hook:ingress"}`},
		{name: "defaults are not sent",
			pc: full, in: `{"message":"hi","name":"","deliver":"yes","timeoutSeconds":-1,"thinking":" "}`,
			want: `{"message":"hi","agentId":"main","sessionKey":"hook:ingress"}`},
		{name: "explicit default values are sent",
			pc: full, in: `{"message":"hi","name":"Hook","deliver":true,"wakeMode":"now","channel":"slack","to":"x"}`,
			want: `{"message":"hi","name":"Hook","agentId":"main","sessionKey":"hook:ingress","wakeMode":"now","deliver":true,"channel":"slack","to":"x"}`},
		{name: "every field",
			pc: full,
			in: `{"message":"m","name":"N","agentId":"OPS","sessionKey":"hook:a","wakeMode":"next-heartbeat","sessionMode":"persistent",` +
				`"channel":"Slack","to":"C1","accountId":"acct","model":"p/m","thinking":"high","timeoutSeconds":12.7,` +
				`"waitForCompletion":true,"extra":"dropped"}`,
			want: `{"message":"m","name":"N","agentId":"ops","sessionKey":"hook:a","wakeMode":"next-heartbeat","sessionMode":"persistent",` +
				`"channel":"slack","to":"C1","accountId":"acct","model":"p/m","thinking":"high","timeoutSeconds":12,"waitForCompletion":true}`},
		{name: "no delivery: channel and to are neither checked nor sent",
			pc: full, in: `{"message":"m","deliver":false,"channel":"sms","to":42}`,
			want: `{"message":"m","agentId":"main","sessionKey":"hook:ingress","deliver":false}`},
		{name: "escaping",
			pc: policyConfig{DefaultSessionKey: "hook:ingress"},
			in: `{"message":"q\"b\\s\n\r\t\u0000\u001f\u007f<&>\u2028\u2029é😀","name":"a\"b"}`,
			// as JSON.stringify: U+2028 and U+2029 stay as they are
			want: `{"message":"q\"b\\s\n\r\t\u0000\u001f` + "\x7f" + `<&>` + "\u2028\u2029" + `é😀","name":"a\"b","sessionKey":"hook:ingress"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPolicy(t, tc.pc)
			a, err := decodeAgent(payload(t, tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Apply(&a); err != nil {
				t.Fatal(err)
			}
			got := a.appendGatewayBody(nil)
			if string(got) != tc.want {
				t.Fatalf("body\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
		})
	}
}

func TestAgentGatewayBodyGeneratedKey(t *testing.T) {
	p := mustPolicy(t, policyConfig{})
	a, err := decodeAgent(payload(t, `{"message":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(&a); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\{"message":"hi","sessionKey":"hook:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"\}$`)
	if got := a.appendGatewayBody(nil); !re.Match(got) {
		t.Fatalf("body %s does not match %s", got, re)
	}
}

func TestKindString(t *testing.T) {
	for _, tc := range []struct {
		k    actionKind
		want string
	}{{kindWake, "wake"}, {kindAgent, "agent"}, {0, "unknown"}, {9, "unknown"}} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("Kind(%d).String() = %q, want %q", tc.k, got, tc.want)
		}
	}
}
