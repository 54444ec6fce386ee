package transform

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSanitize: whatever the message and the payload string, the result
// is valid UTF-8 within the cap, holds no digit, no control character and
// no payload string of four bytes or more.
func FuzzSanitize(f *testing.F) {
	f.Add("TypeError: Cannot read property 'secret' of undefined", "secret")
	f.Add("bad: 42 \"q\\\"u\" `x`", "q\"u")
	f.Add("\x00\u202e\xff", "ab")
	f.Fuzz(func(t *testing.T, msg, value string) {
		out := sanitize(msg, map[string]any{"k": value})
		if !utf8.ValidString(out) || len(out) > maxScriptText {
			t.Fatalf("sanitize(%q) = %q", msg, out)
		}
		for _, r := range out {
			if r >= '0' && r <= '9' || r < 0x20 || r == 0x7f || r == 0x202e {
				t.Fatalf("sanitize(%q) = %q holds %U", msg, out, r)
			}
		}
		if len(value) >= minRedact && strings.Contains(out, value) && !strings.Contains("[payload]…'\"`# ", value) {
			t.Fatalf("sanitize(%q) = %q leaks %q", msg, out, value)
		}
	})
}

// TestPatternDepth checks the group-nesting scanner of run-time patterns.
func TestPatternDepth(t *testing.T) {
	for in, want := range map[string]int{
		``: 0, `a`: 0, `(a)`: 1, `((a)(b))`: 2, `\(\(`: 0, `[(]`: 0, `[\]((]`: 0, `(?=(?:a))`: 2, `)))(`: 1, `(\)`: 1,
	} {
		if got := patternDepth(in); got != want {
			t.Errorf("patternDepth(%q) = %d, want %d", in, got, want)
		}
	}
}
