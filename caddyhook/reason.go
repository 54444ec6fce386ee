package caddyhook

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxPublicReason bounds a reason that comes from elsewhere (the gateway's
// error text) before it reaches a log line or a public answer.
const maxPublicReason = 200

// publicReason makes text from another party fit for a log line and a
// public answer: invalid UTF-8 replaced, control, format and other
// invisible characters (line breaks, bidi controls, …) turned into spaces
// and runs of spaces collapsed, trimmed, and cut at maxPublicReason bytes
// on a character boundary with "…".
func publicReason(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), maxPublicReason+3))
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
		if b.Len()+n > maxPublicReason {
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
