package safetext

import (
	"io"
	"unicode"
	"unicode/utf8"
)

// JSON returns the JSON text b fit for a terminal and still the same JSON
// value: inside its strings, every character Line would drop as
// invisible or as moving the cursor (C0 and C1 controls, DEL, format
// characters such as the bidirectional controls and zero-width ones, the
// line and paragraph separators) is written as a \uXXXX escape (a pair
// for one beyond the BMP). Bytes that are not UTF-8 (which JSON text
// cannot hold) become \ufffd. Outside strings nothing changes, so the
// white space between tokens stays. Go's encoder escapes only C0 controls
// (and U+2028, U+2029), so a sender's hook name or reason carried C1
// controls and bidi overrides to the terminal of `caddy hooks tail --json`.
func JSON(b []byte) []byte {
	var e jsonEscaper
	out := e.append(make([]byte, 0, len(b)+len(b)/8), b)
	if len(e.partial) > 0 { // text cut inside a character
		out = appendEscape(out, utf8.RuneError)
	}
	return out
}

// JSONWriter returns a writer that writes what it is given to w as JSON
// does, for JSON text written in pieces (the state between them is kept;
// a character split between writes is completed by the next).
func JSONWriter(w io.Writer) io.Writer { return &jsonWriter{w: w} }

type jsonWriter struct {
	w io.Writer
	e jsonEscaper
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(j.e.append(nil, p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// jsonEscaper is the state of JSON between pieces: inside a string or
// not, after a backslash, and the start of a character cut off.
type jsonEscaper struct {
	inString, escaped bool
	partial           []byte
}

// append writes b, escaped, after dst.
func (e *jsonEscaper) append(dst, b []byte) []byte {
	if len(e.partial) > 0 {
		b = append(e.partial, b...)
		e.partial = nil
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case !e.inString:
				e.inString = c == '"'
				dst = append(dst, c)
			case e.escaped:
				e.escaped = false
				dst = append(dst, c)
			case c == '\\':
				e.escaped = true
				dst = append(dst, c)
			case c == '"':
				e.inString = false
				dst = append(dst, c)
			case c < 0x20 || c == 0x7F:
				dst = appendEscape(dst, rune(c))
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			e.partial = append([]byte(nil), b[i:]...)
			return dst
		}
		r, size := utf8.DecodeRune(b[i:])
		e.escaped = false
		switch {
		case r == utf8.RuneError && size == 1:
			dst = appendEscape(dst, utf8.RuneError)
		case e.inString && invisible(r):
			dst = appendEscape(dst, r)
		default:
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return dst
}

// invisible reports the characters JSON escapes in strings (beyond ASCII).
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// appendEscape writes r as \uXXXX (two for a character beyond the BMP).
func appendEscape(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	if r > 0xFFFF {
		r -= 0x10000
		dst = appendEscape(dst, 0xD800+(r>>10))
		return appendEscape(dst, 0xDC00+(r&0x3FF))
	}
	return append(dst, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
}
