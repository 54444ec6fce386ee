package cftoken

import (
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// FuzzCaddyfileNewlines checks that Newlines never panics, only
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
		got := Newlines(s)
		if back := strings.ReplaceAll(got, "\n", `\n`); back != s {
			t.Fatalf("Newlines(%q) = %q: more than \\n changed", s, got)
		}
		for i := strings.Index(s, "{{"); i >= 0; {
			end, _ := tmpl.Placeholder(s, i)
			if end < i+2 || end > len(s) {
				t.Fatalf("tmpl.Placeholder(%q, %d) = %d out of range", s, i, end)
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

// TestCaddyfileNewlines checks that \n in a Caddyfile template becomes a
// newline in literal text only, never inside a placeholder, and that the
// result compiles.
func TestCaddyfileNewlines(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`plain`, `plain`},
		{`a\nb`, "a\nb"},
		{`\n\n`, "\n\n"},
		{`a\\nb`, "a\\\nb"},
		{`{{a}}\n{{b}}`, "{{a}}\n{{b}}"},
		{`x{{ cel: path.split("\n")[0] }}\ny`, "x{{ cel: path.split(\"\\n\")[0] }}\ny"},
		{`{{ cel: '}}\n' + path }}\n`, "{{ cel: '}}\\n' + path }}\n"},
		{`{{ cel: "a\"}}\n" + path }}\n`, "{{ cel: \"a\\\"}}\\n\" + path }}\n"},
		{`{{ cel: {"k": {"v": "\n"}}["k"]["v"] }}\n`, "{{ cel: {\"k\": {\"v\": \"\\n\"}}[\"k\"][\"v\"] }}\n"},
		{"{{\n  cel: \"\\n\" }}\\n", "{{\n  cel: \"\\n\" }}\n"},
		{`{{cel:path}}\n`, "{{cel:path}}\n"},
		{`{{ text }}\n{{ unterminated \n`, "{{ text }}\n{{ unterminated \\n"},
	}
	env, err := tmpl.NewEnv(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := Newlines(tc.in)
			if got != tc.want {
				t.Fatalf("Newlines(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(tc.in, "unterminated") {
				return
			}
			if _, err := tmpl.Compile(got, env); err != nil {
				t.Fatalf("result %q does not compile: %v", got, err)
			}
		})
	}
}
