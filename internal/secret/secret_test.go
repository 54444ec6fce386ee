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
		if got := WhyEmpty(tc.raw, "token {env.HOOK_TOKEN}"); !strings.Contains(got, tc.want) {
			t.Errorf("WhyEmpty(%q) = %q, want it to contain %q", tc.raw, got, tc.want)
		}
	}
}
