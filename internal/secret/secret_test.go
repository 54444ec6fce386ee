package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptySecretNamesTheVariable (issue 16 item 7): an empty token says
// which variable or file is empty.
func TestEmptySecretNamesTheVariable(t *testing.T) {
	t.Setenv("CADDYHOOK_UNIT_EMPTY", "")
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ raw, want string }{
		{"", "required (set it, e.g. token {env.HOOK_TOKEN})"},
		{"{env.CADDYHOOK_UNIT_NOT_SET}", "{env.CADDYHOOK_UNIT_NOT_SET} is empty: CADDYHOOK_UNIT_NOT_SET is not set in Caddy's environment (Caddy reads its environment when it starts"},
		{"{env.CADDYHOOK_UNIT_EMPTY}", "CADDYHOOK_UNIT_EMPTY is empty in Caddy's environment"},
		{"{file." + empty + "}", "file " + empty + " is empty"},
		{"{file./nonexistent/x}", "file /nonexistent/x cannot be read (no such file or directory)"},
		{"{env.CADDYHOOK_UNIT_NOT_SET}{file." + empty + "}", "CADDYHOOK_UNIT_NOT_SET is not set in Caddy's environment; file " + empty + " is empty"},
	} {
		if got := Empty(tc.raw, "token {env.HOOK_TOKEN}"); !strings.Contains(got, tc.want) {
			t.Errorf("Empty(%q) = %q, want it to contain %q", tc.raw, got, tc.want)
		}
	}
}

// TestCheckStrength: short or low-variety secrets are refused, and the
// error never shows the secret.
func TestCheckStrength(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{"0123456789abcdef0123456789abcdef", ""},
		{"0123456789abcdef0123456789abcde", "too short (31 characters); use at least 32"},
		{strings.Repeat("abcdefg", 5), "too weak (fewer than 8 distinct characters)"},
	} {
		err := CheckStrength(tc.s)
		if (tc.want == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.s)) {
			t.Errorf("%q: %v, want %q", tc.s, err, tc.want)
		}
	}
}

// TestCheckSet (issue 31 item 6): every empty value at once, each field
// named; one empty value reads as Empty's message; an address (Each) is
// empty when any of its placeholders is; set and unset-but-absent values
// are fine.
func TestCheckSet(t *testing.T) {
	t.Setenv("CADDYHOOK_UNIT_SET", "x")
	t.Setenv("CADDYHOOK_UNIT_EMPTY", " ")
	os.Unsetenv("CADDYHOOK_UNIT_A")
	os.Unsetenv("CADDYHOOK_UNIT_B")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name   string
		fields []Field
		want   string // "" = no error
	}{
		{"none", nil, ""},
		{"set", []Field{{Name: "a", Raw: "{env.CADDYHOOK_UNIT_SET}"}, {Name: "b", Raw: ""}, {Name: "c", Raw: "literal"}}, ""},
		{"one", []Field{{Name: "token", Raw: "{env.CADDYHOOK_UNIT_A}"}},
			"token: {env.CADDYHOOK_UNIT_A} is empty: CADDYHOOK_UNIT_A is not set in Caddy's environment (Caddy reads"},
		{"address", []Field{{Name: "gateway", Raw: "unix/{env.CADDYHOOK_UNIT_A}", Each: true}},
			"gateway: {env.CADDYHOOK_UNIT_A} is empty: CADDYHOOK_UNIT_A is not set"},
		{"address set", []Field{{Name: "gateway", Raw: "unix/{env.CADDYHOOK_UNIT_SET}", Each: true}}, ""},
		{"several", []Field{{Name: "token", Raw: "{env.CADDYHOOK_UNIT_A}"}, {Name: "gateway_token", Raw: "{env.CADDYHOOK_UNIT_B}"},
			{Name: "secret", Raw: "{env.CADDYHOOK_UNIT_A}"}, {Name: "key", Raw: "{file." + missing + "}"}, {Name: "e", Raw: "{env.CADDYHOOK_UNIT_EMPTY}"}},
			"5 values are empty: token: {env.CADDYHOOK_UNIT_A}, gateway_token: {env.CADDYHOOK_UNIT_B}, secret: {env.CADDYHOOK_UNIT_A}, key: {file." + missing +
				"}, e: {env.CADDYHOOK_UNIT_EMPTY}; CADDYHOOK_UNIT_A and CADDYHOOK_UNIT_B are not set in Caddy's environment; file " + missing +
				" cannot be read (no such file or directory); CADDYHOOK_UNIT_EMPTY is empty in Caddy's environment (Caddy reads"},
	} {
		err := CheckSet(tc.fields)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.name, err, tc.want)
		}
	}
}
