package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPublicReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"channel and to must be set together for hook delivery", "channel and to must be set together for hook delivery"},
		{"  two\r\n lines\t\tand tabs ", "two lines and tabs"},
		{"bidi\u202eoverride\u200bzero width\u2066isolate", "bidi override zero width isolate"},
		{"bell\x07 and \x1b[31mescape", "bell and [31mescape"},
		{"bad \xff\xfe utf8", "bad utf8"},
		{"\n\r\t\u202e", ""},
		{strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{strings.Repeat("a", 201), strings.Repeat("a", 200) + "…"},
		{strings.Repeat("é", 150), strings.Repeat("é", 100) + "…"},
	} {
		got := Line(tc.in)
		if got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > MaxLen+len("…") {
			t.Errorf("Line(%q) = %q: invalid or too long", tc.in, got)
		}
	}
}
