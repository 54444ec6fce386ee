package transform

import (
	"math"
	"testing"
	"unicode/utf8"

	"github.com/dop251/goja"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// FuzzTextSize checks the counts the expanding string built-ins are
// guarded by against the built-ins themselves (goja's, unguarded): exact
// for the decomposed normal forms, the case conversions,
// encodeURIComponent, escape and a JSON string; an upper bound for the
// composed normal forms and encodeURI.
func FuzzTextSize(f *testing.F) {
	for _, s := range []string{"", "abc", "ß", "ΐ", "İ", "\uFDFA", "ﬃ", "가각", "é\u0301", "\U0001F600", "a b&c/d?e", "\x01\"\\\n\t",
		"Σ", "ǅ", "\u0958", "\u1E9E", "a\u0345\u03C2", "\u00ff\u0100\u07ff\u0800"} {
		f.Add(s)
	}
	plain := plainGoja(f)
	upper, lower := casedLength(cases.Upper(language.Und)), casedLength(cases.Lower(language.Und))
	form := func(name string) []goja.Value { return []goja.Value{plain.ToValue(name)} }
	counts := []struct {
		expr  string
		count func(goja.String) int64
		exact bool
	}{
		{`s.normalize("NFD")`, func(s goja.String) int64 { return decomposedLength(s, form("NFD"), math.MaxInt64) }, true},
		{`s.normalize("NFKD")`, func(s goja.String) int64 { return decomposedLength(s, form("NFKD"), math.MaxInt64) }, true},
		{`s.normalize()`, func(s goja.String) int64 { return decomposedLength(s, nil, math.MaxInt64) }, false},
		{`s.normalize("NFKC")`, func(s goja.String) int64 { return decomposedLength(s, form("NFKC"), math.MaxInt64) }, false},
		{`s.toUpperCase()`, func(s goja.String) int64 { return upper(s, nil, math.MaxInt64) }, true},
		{`s.toLowerCase()`, func(s goja.String) int64 { return lower(s, nil, math.MaxInt64) }, true},
		{`encodeURIComponent(s)`, func(s goja.String) int64 { return encodedURILength(s, nil, math.MaxInt64) }, true},
		{`encodeURI(s)`, func(s goja.String) int64 { return encodedURILength(s, nil, math.MaxInt64) }, false},
		{`escape(s)`, func(s goja.String) int64 { return escapedLength(s, nil, math.MaxInt64) }, true},
		{`JSON.stringify(s)`, func(s goja.String) int64 { return int64(quotedLength(s)) }, true},
	}
	f.Fuzz(func(t *testing.T, str string) {
		if len(str) > 256 || !utf8.ValidString(str) {
			return // (a JavaScript string comes from valid UTF-8 or UTF-16)
		}
		if err := plain.Set("s", str); err != nil {
			t.Fatal(err)
		}
		s := plain.Get("s").(goja.String)
		for _, c := range counts {
			v, err := plain.RunString(c.expr)
			if err != nil {
				continue // a URIError for a lone surrogate: nothing is built
			}
			got, want := c.count(s), int64(v.(goja.String).Length())
			if got < want || (c.exact && got != want) {
				t.Fatalf("%s with s=%q: counted %d, the built-in made %d", c.expr, str, got, want)
			}
		}
	})
}
