package transform

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Some string built-ins return, in one native step, a result several
// times longer than their input: normalize("NFKD") up to 18 times (U+FDFA
// decomposes into 18 characters), encodeURIComponent and encodeURI 9
// times, escape 6, the case conversions 3 (ΐ upper-cases to three
// characters). On an input at the string cap, normalize built 545 MiB in
// 3 s and toUpperCase 99 MiB, in calls whose budget is 8 MiB. Each is
// replaced by a version that converts its input to a string once and,
// when that input is long enough for the result to pass the string cap,
// counts the result's length without building it (in constant memory)
// and refuses it past the cap. (JSON.stringify counts its escapes as it
// goes, stringify.go.)

// expanding is a string built-in whose result is at most factor times as
// long as its input, in UTF-16 code units; length counts the result of
// one call on s with the given arguments, stopping once past limit.
type expanding struct {
	name   string
	factor int64
	length func(s goja.String, args []goja.Value, limit int64) int64
}

// installTextSize guards the string built-ins that expand their input.
func (g *guard) installTextSize(str, global *goja.Object) {
	for _, m := range []expanding{
		{"normalize", 18, decomposedLength},
		{"toUpperCase", 3, casedLength(cases.Upper(language.Und))},
		{"toLocaleUpperCase", 3, casedLength(cases.Upper(language.Und))},
		{"toLowerCase", 3, casedLength(cases.Lower(language.Und))},
		{"toLocaleLowerCase", 3, casedLength(cases.Lower(language.Und))},
	} {
		g.guardExpanding(str, m, true)
	}
	for _, m := range []expanding{
		{"encodeURIComponent", 9, encodedURILength},
		{"encodeURI", 9, encodedURILength},
		{"escape", 6, escapedLength},
	} {
		g.guardExpanding(global, m, false)
	}
}

// guardExpanding replaces obj[m.name]. The input is this for a String
// method (onThis), else the first argument; either is converted to a
// string once and handed on converted, so a toString cannot show the
// count one string and the built-in another (normalize's form likewise).
func (g *guard) guardExpanding(obj *goja.Object, m expanding, onThis bool) {
	origVal := obj.Get(m.name)
	orig, ok := goja.AssertFunction(origVal)
	if !ok {
		return
	}
	g.define(obj, m.name, origVal.ToObject(g.rt).Get("length"), func(fc goja.FunctionCall) goja.Value {
		this, args := fc.This, fc.Arguments
		var s goja.String
		if onThis {
			var ok bool
			if s, ok = thisString(fc); !ok {
				return g.invoke(orig, this, args...) // null or undefined: the built-in's TypeError
			}
			this = s
		} else {
			s = toStr(fc.Argument(0))
			args = append([]goja.Value{s}, args[min(1, len(args)):]...)
		}
		if n := int64(s.Length()); n*m.factor > g.maxChars {
			if len(args) > 0 && onThis && !isUndef(args[0]) {
				args = append([]goja.Value{toStr(args[0])}, args[1:]...)
			}
			if l := m.length(s, args, g.maxChars); l > g.maxChars {
				g.fail(m.name, float64(l), g.maxChars)
			}
		}
		return g.invoke(orig, this, args...)
	})
}

// asciiText returns s as a Go string when goja holds it as one (its ASCII
// representation, whose conversion costs nothing); a count reads any other
// string rune by rune, as converting it would take several times its size.
func asciiText(s goja.String) (string, bool) {
	if reflect.ValueOf(s).Kind() == reflect.String {
		return s.String(), true
	}
	return "", false
}

// decomposedLength counts String.prototype.normalize's result as the
// length of the decomposed form (NFD, or NFKD for the compatibility
// forms), which the composed forms never exceed; an unknown form counts
// nothing (the built-in throws its RangeError). A decomposition is a
// property of each character, read from the tables (a Hangul syllable
// decomposes by rule into two or three jamo), so the count takes no
// normalization work.
func decomposedLength(s goja.String, args []goja.Value, limit int64) int64 {
	f := norm.NFD
	if len(args) > 0 && !isUndef(args[0]) {
		switch args[0].String() {
		case "NFC", "NFD":
		case "NFKC", "NFKD":
			f = norm.NFKD
		default:
			return 0
		}
	}
	if str, ok := asciiText(s); ok {
		return int64(len(str))
	}
	var n int64
	var buf [utf8.UTFMax]byte
	for r := s.Reader(); n <= limit; {
		c, _, err := r.ReadRune()
		if err != nil {
			break
		}
		if c < utf8.RuneSelf {
			n++
			continue
		}
		if d := f.Properties(buf[:utf8.EncodeRune(buf[:], c)]).Decomposition(); len(d) > 0 {
			n += utf16Length(d)
			continue
		}
		switch {
		case c >= hangulFirst && c <= hangulLast && (c-hangulFirst)%hangulTrailing == 0:
			n += 2 // leading and vowel jamo
		case c >= hangulFirst && c <= hangulLast:
			n += 3 // and a trailing one
		case c > 0xFFFF:
			n += 2
		default:
			n++
		}
	}
	return n
}

// The Hangul syllables, which decompose by rule, not from the tables: a
// syllable whose index is a multiple of hangulTrailing has no trailing
// consonant.
const (
	hangulFirst    = 0xAC00
	hangulLast     = 0xD7A3
	hangulTrailing = 28
)

// casedLength counts what the case conversion c makes of s, through
// fixed buffers, stopping once past limit. ASCII keeps its length.
func casedLength(c cases.Caser) func(goja.String, []goja.Value, int64) int64 {
	return func(s goja.String, _ []goja.Value, limit int64) int64 {
		if str, ok := asciiText(s); ok {
			return int64(len(str))
		}
		w := &utf16Counter{limit: limit}
		_, _ = io.Copy(w, transform.NewReader(&runeBytes{r: s.Reader()}, c))
		return w.n
	}
}

// runeBytes reads the runes of r as UTF-8.
type runeBytes struct {
	r       io.RuneReader
	buf     [utf8.UTFMax]byte
	pending []byte
}

func (b *runeBytes) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(b.pending) == 0 {
			r, _, err := b.r.ReadRune()
			if err != nil {
				if n > 0 {
					return n, nil
				}
				return 0, err
			}
			b.pending = b.buf[:utf8.EncodeRune(b.buf[:], r)]
		}
		k := copy(p[n:], b.pending)
		b.pending = b.pending[k:]
		n += k
	}
	return n, nil
}

// utf16Length is the length of UTF-8 text in UTF-16 code units: one per
// rune start, two for a rune beyond the BMP.
func utf16Length(p []byte) int64 {
	var n int64
	for _, b := range p {
		switch {
		case b >= 0xF0:
			n += 2
		case b&0xC0 != 0x80:
			n++
		}
	}
	return n
}

// utf16Counter counts the UTF-16 length of the UTF-8 written to it, and
// fails a write once past limit.
type utf16Counter struct {
	n, limit int64
}

func (c *utf16Counter) Write(p []byte) (int, error) {
	c.n += utf16Length(p)
	if c.n > c.limit {
		return 0, errPastLimit
	}
	return len(p), nil
}

// errPastLimit stops a count once it is past its limit.
var errPastLimit = errors.New("past the limit")

// encodedURILength counts encodeURIComponent's result, which is also an
// upper bound of encodeURI's (it leaves more characters as they are):
// three characters (%XX) per UTF-8 byte of an escaped character, so 6 for
// a code unit up to U+07FF, 9 for any other, 6 for each half of a
// surrogate pair (12 for the four bytes of the character).
func encodedURILength(s goja.String, _ []goja.Value, limit int64) int64 {
	return unitsLength(s, limit, func(c uint16) int64 {
		switch {
		case c < utf8.RuneSelf && keeps(byte(c), "-_.!~*'()"):
			return 1
		case c < utf8.RuneSelf:
			return 3
		case c < 0x800 || (c >= 0xD800 && c <= 0xDFFF):
			return 6
		}
		return 9
	})
}

// escapedLength counts escape's result: a kept character is one, a code
// unit up to U+00FF three (%XX), any other six (%uXXXX).
func escapedLength(s goja.String, _ []goja.Value, limit int64) int64 {
	return unitsLength(s, limit, func(c uint16) int64 {
		switch {
		case c < utf8.RuneSelf && keeps(byte(c), "@*_+-./"):
			return 1
		case c <= 0xFF:
			return 3
		}
		return 6
	})
}

// unitsLength sums the length each UTF-16 code unit of s becomes,
// stopping once past limit.
func unitsLength(s goja.String, limit int64, length func(c uint16) int64) int64 {
	var n int64
	for i, l := 0, s.Length(); i < l && n <= limit; i++ {
		n += length(s.CharAt(i))
	}
	return n
}

// keeps reports an ASCII letter or digit, or one of marks: the characters
// an escaping function leaves as they are.
func keeps(c byte, marks string) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte(marks, c) >= 0
}
