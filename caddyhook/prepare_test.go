package caddyhook

import (
	"encoding/json"
	"regexp"
	"testing"
)

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
