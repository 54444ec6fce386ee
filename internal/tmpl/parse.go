package tmpl

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Placeholder prefixes of the reference grammar.
const (
	prefixHeaders = "headers."
	prefixQuery   = "query."
	prefixPayload = "payload."
	prefixCEL     = "cel:"
)

// Compile parses src once into its compiled form. CEL placeholders
// `{{ cel: <expr> }}` are compiled with env; env may be nil when no CEL is
// used, and then a cel: placeholder is a compile error. Errors are *Error,
// positioned (1-based line and column) within src.
func Compile(src string, env *Env) (*Template, error) {
	t := &Template{src: src}
	lit := 0 // start of the pending literal text
	for {
		j := strings.Index(src[lit:], "{{")
		if j < 0 {
			break
		}
		open := lit + j
		if open > lit {
			t.parts = append(t.parts, part{kind: partLiteral, text: src[lit:open]})
		}
		p, end, err := compilePlaceholder(src, open, env)
		if err != nil {
			return nil, err
		}
		t.parts = append(t.parts, p)
		lit = end
	}
	if lit < len(src) {
		t.parts = append(t.parts, part{kind: partLiteral, text: src[lit:]})
	}
	t.static = len(t.parts) == 0 || len(t.parts) == 1 && t.parts[0].kind == partLiteral
	return t, nil
}

// compilePlaceholder compiles the placeholder whose "{{" is at src[open:]
// and returns the offset just past its "}}".
func compilePlaceholder(src string, open int, env *Env) (part, int, error) {
	if start, ok := celStart(src, open); ok {
		return compileCELPlaceholder(src, open, start, env)
	}
	body := skipSpace(src, open+2)
	k := strings.IndexByte(src[body:], '}')
	switch {
	case k < 0:
		return part{}, 0, errorAt(src, open, "unterminated {{")
	case !strings.HasPrefix(src[body+k:], "}}"):
		if strings.Contains(src[body+k:], "}}") {
			return part{}, 0, errorAt(src, body+k, "stray } inside placeholder")
		}
		return part{}, 0, errorAt(src, open, "unterminated {{")
	}
	raw := src[body : body+k]
	if n := strings.Index(raw, "{{"); n >= 0 {
		return part{}, 0, errorAt(src, body+n, "{{ inside placeholder")
	}
	expr := strings.TrimRightFunc(raw, unicode.IsSpace)
	if expr == "" {
		return part{}, 0, errorAt(src, open, "empty placeholder")
	}
	p, msg := referencePart(expr)
	if msg != "" {
		return part{}, 0, errorAt(src, body, msg)
	}
	return p, body + k + 2, nil
}

// referencePart compiles a reference-grammar expression; msg is non-empty
// when it is malformed.
func referencePart(expr string) (p part, msg string) {
	switch {
	case expr == "path":
		return part{kind: partPath}, ""
	case expr == "now":
		return part{kind: partNow}, ""
	case expr == varEvent:
		// the provider's event name when there is one, else the payload
		// member event as before (Zoom, Calendly, … name theirs so)
		path, _ := ParsePath(varEvent)
		return part{kind: partEvent, path: path}, ""
	case strings.HasPrefix(expr, prefixHeaders):
		name := strings.ToLower(expr[len(prefixHeaders):])
		if name == "" {
			return part{}, "empty header name"
		}
		return namePart(partHeader, name), ""
	case strings.HasPrefix(expr, prefixQuery):
		name := expr[len(prefixQuery):]
		if name == "" {
			return part{}, "empty query parameter name"
		}
		return namePart(partQuery, name), ""
	case strings.HasPrefix(expr, prefixPayload):
		expr = expr[len(prefixPayload):]
	}
	path, err := ParsePath(expr)
	if err != nil {
		return part{}, "empty payload path"
	}
	return part{kind: partPayload, path: path}, ""
}

// namePart is a header or query part, or nothing for a blocked name.
func namePart(kind partKind, name string) part {
	if isBlockedKey(name) {
		return part{kind: partMissing}
	}
	return part{kind: kind, text: name}
}

// celStart reports whether the placeholder opened by the "{{" at
// src[open:] is a CEL placeholder: "cel:" after any white space (Unicode's,
// as skipSpace reads it). start is the offset just past "cel:".
func celStart(src string, open int) (start int, ok bool) {
	body := skipSpace(src, open+2)
	if strings.HasPrefix(src[body:], prefixCEL) {
		return body + len(prefixCEL), true
	}
	return 0, false
}

// Placeholder is how Compile reads the placeholder opened by the "{{" at
// src[open:]: whether it is a CEL placeholder, and the offset just past
// the "}}" that closes it (len(src) when none does). In a CEL placeholder,
// string literals and map braces may hold "}}" (scanCEL). Tools that
// handle templates without compiling them (the importer writing them to a
// Caddyfile) read them with it, so that they read what the engine runs.
func Placeholder(src string, open int) (end int, cel bool) {
	if start, ok := celStart(src, open); ok {
		if closing, _ := scanCEL(src, start); closing >= 0 {
			return closing + 2, true
		}
		return len(src), true
	}
	if j := strings.Index(src[open+2:], "}}"); j >= 0 {
		return open + 2 + j + 2, false
	}
	return len(src), false
}

// UsesCEL reports whether a "{{" in src opens a placeholder Compile reads
// as CEL. Every "{{" is looked at: Compile reads each one outside a
// placeholder as a placeholder, and one inside a placeholder is an error
// or part of a CEL expression already, so UsesCEL is true whenever the
// compiled template would run CEL (and for some templates Compile
// refuses).
func UsesCEL(src string) bool {
	for i := strings.Index(src, "{{"); i >= 0; {
		if _, cel := celStart(src, i); cel {
			return true
		}
		next := strings.Index(src[i+1:], "{{")
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// compileCELPlaceholder compiles `{{ cel: <expr> }}`; expr starts at
// src[start:].
func compileCELPlaceholder(src string, open, start int, env *Env) (part, int, error) {
	closing, stray := scanCEL(src, start)
	switch {
	case stray >= 0:
		return part{}, 0, errorAt(src, stray, "stray } inside placeholder")
	case closing < 0:
		return part{}, 0, errorAt(src, open, "unterminated {{")
	case env == nil:
		return part{}, 0, errorAt(src, open, "cel: placeholder needs a CEL environment")
	}
	exprStart := skipSpace(src, start)
	expr := strings.TrimRightFunc(src[exprStart:max(exprStart, closing)], unicode.IsSpace)
	if expr == "" {
		return part{}, 0, errorAt(src, open, "empty CEL expression")
	}
	prg, _, err := env.program(expr)
	if err != nil {
		ce := err.(*Error)
		return part{}, 0, errorAt(src, exprStart+offsetOf(expr, ce.Line, ce.Column), ce.Msg)
	}
	line, col := position(src, open)
	return part{kind: partCEL, prg: prg, line: line, col: col}, closing + 2, nil
}

// scanCEL finds the "}}" that closes a CEL placeholder, skipping string
// literals and balanced braces (map literals). It returns the offset of
// that "}}" (-1 if none) or, for an unbalanced "}", its offset as stray.
func scanCEL(src string, i int) (closing, stray int) {
	depth := 0
	for i < len(src) {
		switch c := src[i]; c {
		case '"', '\'':
			if i = skipCELString(src, i); i < 0 {
				return -1, -1
			}
			continue
		case '{':
			depth++
		case '}':
			switch {
			case depth > 0:
				depth--
			case strings.HasPrefix(src[i:], "}}"):
				return i, -1
			default:
				return -1, i
			}
		}
		i++
	}
	return -1, -1
}

// skipCELString returns the offset just past the CEL string literal whose
// opening quote is at src[i], or -1 when it is unterminated. A raw literal
// (r or R prefix) has no escapes; triple quotes may span lines.
func skipCELString(src string, i int) int {
	q := src[i]
	raw := i > 0 && (src[i-1] == 'r' || src[i-1] == 'R')
	delim := string(q)
	if strings.HasPrefix(src[i:], delim+delim+delim) {
		delim += delim + delim
	}
	for j := i + len(delim); j < len(src); j++ {
		switch {
		case src[j] == '\\' && !raw:
			j++
		case strings.HasPrefix(src[j:], delim):
			return j + len(delim)
		case src[j] == '\n' && len(delim) == 1:
			return -1
		}
	}
	return -1
}

// skipSpace returns the offset of the first non-space character at or
// after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += size
	}
	return i
}

// offsetOf converts a 1-based line and column (in characters) within s to
// a byte offset, clamped to len(s).
func offsetOf(s string, line, col int) int {
	off := 0
	for ; line > 1; line-- {
		nl := strings.IndexByte(s[off:], '\n')
		if nl < 0 {
			return len(s)
		}
		off += nl + 1
	}
	for ; col > 1 && off < len(s); col-- {
		_, size := utf8.DecodeRuneInString(s[off:])
		off += size
	}
	return off
}

// position converts a byte offset in s to a 1-based line and column (in
// characters).
func position(s string, off int) (line, col int) {
	line = 1 + strings.Count(s[:off], "\n")
	lineStart := strings.LastIndexByte(s[:off], '\n') + 1
	return line, 1 + utf8.RuneCountInString(s[lineStart:off])
}

// errorAt is an *Error at byte offset off of src.
func errorAt(src string, off int, msg string) *Error {
	line, col := position(src, off)
	return &Error{Line: line, Column: col, Msg: msg}
}
