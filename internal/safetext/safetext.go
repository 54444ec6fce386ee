// Package safetext makes text that comes from another party (a gateway's
// error, a sender's hook name, a stored reason) fit for a log line, a
// public answer or a terminal: one line of printable characters, bounded.
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds the text Line returns, in bytes (plus "…" when cut).
const MaxLen = 200

// Line makes text from another party fit for a log line, a public answer
// or a terminal: invalid UTF-8 replaced, control, format and other
// invisible characters (line breaks, bidi controls, …) turned into spaces
// and runs of spaces collapsed, trimmed, and cut at MaxLen bytes
// on a character boundary with "…".
func Line(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), MaxLen+3))
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		n := utf8.RuneLen(r)
		if space {
			n++
		}
		if b.Len()+n > MaxLen {
			b.WriteString("…")
			return b.String()
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
