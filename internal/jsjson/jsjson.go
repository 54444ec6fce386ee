// Package jsjson reads JSON as JavaScript's JSON.parse does (ECMA-262,
// which reads RFC 8259's grammar): any nesting depth, a number beyond
// float64's range as ±Infinity, the last of duplicate member names. Go's
// encoding/json refuses both of the former (a depth over 10,000, a
// number it cannot hold), so an edge that decides with it refuses bodies
// the gateway it fronts accepts. Strings decode as encoding/json decodes
// them (invalid UTF-8 and lone surrogates as U+FFFD, as Node reads a
// body's bytes).
package jsjson

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the depth down to which Decode builds values; a container
// deeper is checked but decoded as an empty one of its kind (an
// authenticated sender must not make the edge build millions of nested
// values; nothing the edge reads lies that deep).
const MaxDepth = 10000

// ErrSyntax is the error of a text JSON.parse refuses.
var ErrSyntax = errors.New("invalid JSON")

// Valid reports whether JSON.parse accepts data (surrounding JSON white
// space allowed, nothing else around the value).
func Valid(data []byte) bool {
	_, err := parse(data, false)
	return err == nil
}

// Decode parses data as JSON.parse does and returns its value as
// encoding/json would into an any (map[string]any, []any, string,
// float64, bool, nil), numbers out of range as ±Inf.
func Decode(data []byte) (any, error) {
	return parse(data, true)
}

// frame is an open container on the parser's stack.
type frame struct {
	obj   map[string]any // an object's members (build)
	arr   []any          // an array's elements (build)
	key   string         // the object member whose value is being read
	isObj bool
	keep  bool // build: within MaxDepth
}

// parse is the iterative parser: an explicit stack, no recursion.
func parse(data []byte, build bool) (any, error) {
	p := parser{data: data}
	var stack []frame
	var result any
	// put places a finished value into the open container (or the result).
	put := func(v any) {
		if len(stack) == 0 {
			result = v
			return
		}
		f := &stack[len(stack)-1]
		if !f.keep {
			return
		}
		if f.isObj {
			f.obj[f.key] = v
		} else {
			f.arr = append(f.arr, v)
		}
	}
	keep := func() bool { return build && len(stack) < MaxDepth && (len(stack) == 0 || stack[len(stack)-1].keep) }
	p.space()
	for {
		// a value starts here
		if p.i >= len(p.data) {
			return nil, ErrSyntax
		}
		var v any
		opened := false
		switch c := p.data[p.i]; {
		case c == '{':
			p.i++
			f := frame{isObj: true, keep: keep()}
			if f.keep {
				f.obj = map[string]any{}
			}
			p.space()
			if p.peek() == '}' {
				p.i++
				v = emptyOf(f)
				break
			}
			k, err := p.key(f.keep)
			if err != nil {
				return nil, err
			}
			f.key = k
			stack = append(stack, f)
			opened = true
		case c == '[':
			p.i++
			f := frame{keep: keep()}
			if f.keep {
				f.arr = []any{}
			}
			p.space()
			if p.peek() == ']' {
				p.i++
				v = emptyOf(f)
				break
			}
			stack = append(stack, f)
			opened = true
		case c == '"':
			s, err := p.str(build)
			if err != nil {
				return nil, err
			}
			v = s
		case c == '-' || c >= '0' && c <= '9':
			n, err := p.number(build)
			if err != nil {
				return nil, err
			}
			v = n
		default:
			switch {
			case p.lit("true"):
				v = true
			case p.lit("false"):
				v = false
			case p.lit("null"):
				v = nil
			default:
				return nil, ErrSyntax
			}
		}
		if opened {
			p.space()
			continue
		}
		// a value ended: close the containers it ends
		for {
			if build {
				put(v)
			}
			p.space()
			if len(stack) == 0 {
				if p.i != len(p.data) {
					return nil, ErrSyntax
				}
				return result, nil
			}
			f := &stack[len(stack)-1]
			c := p.peek()
			if c == ',' {
				p.i++
				p.space()
				if f.isObj {
					k, err := p.key(f.keep)
					if err != nil {
						return nil, err
					}
					f.key = k
				}
				break
			}
			if f.isObj && c == '}' || !f.isObj && c == ']' {
				p.i++
				if f.isObj {
					v = f.obj
				} else {
					v = f.arr
				}
				deep := build && !f.keep
				stack = stack[:len(stack)-1]
				if deep {
					// the first container past MaxDepth: empty, in a
					// parent that keeps it
					v = nil
					if len(stack) > 0 && stack[len(stack)-1].keep {
						v = emptyOf(frame{isObj: f.isObj, keep: true})
					}
				}
				continue
			}
			return nil, ErrSyntax
		}
		p.space()
	}
}

// emptyOf is an empty container of f's kind (nil when not building).
func emptyOf(f frame) any {
	if !f.keep {
		return nil
	}
	if f.isObj {
		return map[string]any{}
	}
	return []any{}
}

// parser is the input and the position.
type parser struct {
	data []byte
	i    int
}

// space skips JSON white space.
func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek is the next byte, or 0 at the end.
func (p *parser) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

// lit consumes a literal.
func (p *parser) lit(s string) bool {
	if len(p.data)-p.i >= len(s) && string(p.data[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// key reads an object member's name and the colon after it.
func (p *parser) key(build bool) (string, error) {
	if p.peek() != '"' {
		return "", ErrSyntax
	}
	k, err := p.str(build)
	if err != nil {
		return "", err
	}
	p.space()
	if p.peek() != ':' {
		return "", ErrSyntax
	}
	p.i++
	p.space()
	return k, nil
}

// str reads a string: no raw control character, only JSON's escapes.
func (p *parser) str(build bool) (string, error) {
	start := p.i
	p.i++ // the opening quote
	escaped := false
	for {
		if p.i >= len(p.data) {
			return "", ErrSyntax
		}
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			raw := p.data[start:p.i]
			if !build {
				return "", nil
			}
			if !escaped && utf8.Valid(raw) {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", ErrSyntax
			}
			return s, nil
		case c < 0x20:
			return "", ErrSyntax
		case c == '\\':
			escaped = true
			p.i++
			switch p.peek() {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				p.i++
				for range 4 {
					if !isHex(p.peek()) {
						return "", ErrSyntax
					}
					p.i++
				}
			default:
				return "", ErrSyntax
			}
		default:
			p.i++
		}
	}
}

// number reads a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?;
// beyond float64's range it is ±Inf, as in JavaScript.
func (p *parser) number(build bool) (float64, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		p.digits()
	default:
		return 0, ErrSyntax
	}
	if p.peek() == '.' {
		p.i++
		if p.digits() == 0 {
			return 0, ErrSyntax
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if p.digits() == 0 {
			return 0, ErrSyntax
		}
	}
	if !build {
		return 0, nil
	}
	f, err := strconv.ParseFloat(string(p.data[start:p.i]), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, ErrSyntax
	}
	return f, nil
}

// digits consumes decimal digits and counts them.
func (p *parser) digits() int {
	n := 0
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
