package caddyhook

import (
	"encoding/json"
	"errors"
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
