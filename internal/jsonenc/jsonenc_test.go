package jsonenc

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "hello", `"hello"`},
		{"empty", "", `""`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"named escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls", "\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"DEL kept", "\x7f", "\"\x7f\""},
		{"no HTML escaping", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"line separators kept", "a\u2028b\u2029c", "\"a\u2028b\u2029c\""},
		{"multi-byte kept", "é中😀", `"é中😀"`},
		{"literal U+FFFD kept", "\uFFFD", "\"\uFFFD\""},
		{"invalid byte", "a\xffb", "\"a\ufffdb\""},
		{"truncated sequence", "a\xc3", "\"a\ufffd\""},
		{"surrogate encoding", "\xed\xa0\x80", "\"\ufffd\ufffd\ufffd\""},
		{"overlong slash", "\xc0\xaf", "\"\ufffd\ufffd\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendString([]byte("x"), tc.in)
			if string(got) != "x"+tc.want {
				t.Fatalf("got %s, want x%s", got, tc.want)
			}
			if !json.Valid(got[1:]) {
				t.Fatalf("invalid JSON %s", got[1:])
			}
		})
	}
}

// FuzzAppendString: the output is valid JSON that decodes to s (with
// invalid UTF-8 replaced), whatever s is.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\u2028", "\xff\xfe", "é😀\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %q: %v", s, enc, err)
		}
		want := []rune{}
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			want = append(want, r)
			i += size
		}
		if back != string(want) {
			t.Fatalf("%q round-trips to %q", s, back)
		}
	})
}
