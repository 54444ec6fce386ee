package caddyhook

import (
	"strings"
	"testing"
)

// FuzzCaddyfileNewlines checks that caddyfileNewlines never panics, only
// ever turns the two characters \n into a newline, and leaves the body of
// every placeholder as written.
func FuzzCaddyfileNewlines(f *testing.F) {
	for _, s := range []string{
		`first\nsecond`,
		`a {{ cel: payload.text.split("\n")[0] }}\n{{subject}}`,
		`{{ cel: {"k": "}}\n"}["k"] }}\n`,
		`{{ cel: 'it\'s \n' }}`,
		`{{unclosed \n`,
		`\\n {{x}}\n`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "\n") {
			return // Caddyfile tokens from one quoted line hold no raw newline
		}
		got := caddyfileNewlines(s)
		if back := strings.ReplaceAll(got, "\n", `\n`); back != s {
			t.Fatalf("caddyfileNewlines(%q) = %q: more than \\n changed", s, got)
		}
		for i := strings.Index(s, "{{"); i >= 0; {
			end := placeholderEnd(s, i+2)
			if end < i+2 || end > len(s) {
				t.Fatalf("placeholderEnd(%q, %d) = %d out of range", s, i+2, end)
			}
			if !strings.Contains(got, s[i:end]) {
				t.Fatalf("placeholder %q of %q changed: %q", s[i:end], s, got)
			}
			next := strings.Index(s[end:], "{{")
			if next < 0 {
				break
			}
			i = end + next
		}
	})
}
