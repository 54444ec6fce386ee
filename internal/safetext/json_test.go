package safetext

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzJSON checks JSON and JSONWriter on what Go's encoder writes for any
// string, as a value, as a key and indented: the result is valid JSON of
// the same value, holds no character JSON escapes outside an escape,
// keeps the text between tokens, and the writer fed in pieces writes the
// same.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "wake\u0085\u009b31m", "bidi\u202eevil\u2066", "zero\u200bwidth\ufeff", "line\u2028sep",
		"tab\tnew\nline\x01\x7f", "quote\" back\\slash", "emoji \U0001F600 and tag \U000E0041", "bad \xff utf8", "é\u0301"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		in := map[string]any{"hook": s, s: []any{s, 1.5, nil, true}}
		raw, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out := JSON(raw)
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("JSON(%q) = %q: %v", raw, out, err)
		}
		var want map[string]any
		_ = json.Unmarshal(raw, &want)
		if a, b := mustMarshal(t, back), mustMarshal(t, want); !bytes.Equal(a, b) {
			t.Fatalf("the value changed: %s, want %s", a, b)
		}
		if !utf8.Valid(out) {
			t.Fatalf("JSON(%q) = %q: not UTF-8", raw, out)
		}
		for _, r := range string(out) {
			if r != '\n' && invisible(r) {
				t.Fatalf("JSON(%q) = %q holds %U", raw, out, r)
			}
		}
		if bytes.Count(out, []byte("\n")) != bytes.Count(raw, []byte("\n")) {
			t.Fatalf("the lines between tokens changed: %q", out)
		}
		var buf bytes.Buffer
		w := JSONWriter(&buf)
		step := 1 + abs(cut)%7
		for i := 0; i < len(raw); i += step {
			if _, err := w.Write(raw[i:min(len(raw), i+step)]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("written in pieces of %d: %q, want %q", step, buf.Bytes(), out)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestJSONEscapes: each kind of character is escaped inside strings and
// only there.
func TestJSONEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"hook":"a` + "\u0085\u009b" + `b"}`, `{"hook":"a\u0085\u009bb"}`},
		{`["` + "\u202e\u2066\u200b\ufeff\u2028" + `"]`, `["\u202e\u2066\u200b\ufeff\u2028"]`},
		{`["` + "\U000E0041" + `"]`, `["\udb40\udc41"]`},
		{`["` + "\x7f" + `"]`, `["\u007f"]`},
		{"{\n  \"a\": \"é \U0001F600\"\n}", "{\n  \"a\": \"é \U0001F600\"\n}"},
		{`["a\"` + "\u202e" + `\\"]`, `["a\"\u202e\\"]`},
		{"[\"\xff\"]", `["\ufffd"]`},
	} {
		if got := string(JSON([]byte(tc.in))); got != tc.want {
			t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
