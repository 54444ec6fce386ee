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
