package verify

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxJSONDepth bounds how deeply jsonValue descends or skips; deeper
// documents yield no value (encoding/json stops at 10000, the gateway far
// earlier).
const maxJSONDepth = 512

// jsonValue returns the raw JSON value at path in doc: object members by
// exact name (the last of duplicate members wins, as with encoding/json),
// array elements by canonical decimal index. It returns nil when doc has
// no such value or is malformed on the way. It allocates nothing unless a
// member name on the way is written with escapes.
//
// It reads the provider-signed body after verification, so it need not
// validate what it skips; it must only never misread a structure, which
// FuzzJSONValue checks against encoding/json.
func jsonValue(doc []byte, path ...string) []byte {
	s := jsonScanner{b: doc}
	s.ws()
	start, end := s.i, len(doc)
	for end > start && isJSONSpace(doc[end-1]) {
		end--
	}
	if start >= end {
		return nil
	}
	if len(path) == 0 {
		v := jsonScanner{b: doc[:end], i: start}
		if _, e, ok := v.value(0); !ok || e != end {
			return nil
		}
		return doc[start:end]
	}
	for _, key := range path {
		sub := jsonScanner{b: doc[:end], i: start}
		var ok bool
		if start, end, ok = sub.member(key); !ok {
			return nil
		}
	}
	return doc[start:end]
}

// isJSONSpace reports whether c is JSON whitespace.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonScanner walks a JSON document.
type jsonScanner struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// value skips one value at s.i and returns its extent.
func (s *jsonScanner) value(depth int) (start, end int, ok bool) {
	if depth > maxJSONDepth || s.i >= len(s.b) {
		return 0, 0, false
	}
	start = s.i
	switch c := s.b[s.i]; c {
	case '"':
		ok = s.str()
	case '{', '[':
		ok = s.elements(depth, nil)
	default:
		ok = s.scalar()
	}
	return start, s.i, ok
}

// str skips a string starting at its opening quote.
func (s *jsonScanner) str() bool {
	i := s.i + 1
	for {
		j := bytes.IndexByte(s.b[i:], '"')
		if j < 0 {
			return false
		}
		k := i + j
		bs := 0
		for p := k - 1; p > s.i && s.b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			s.i = k + 1
			return true
		}
		i = k + 1
	}
}

// scalar skips a number or a literal (true, false, null).
func (s *jsonScanner) scalar() bool {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			break
		}
		if c == '"' || c == '{' || c == '[' || c == ':' {
			return false
		}
		s.i++
	}
	return s.i > start
}

// elements walks the object or array starting at s.i (its opening
// brace or bracket) and reports whether it is well formed, leaving s.i
// after it. fn, when not nil, is called for each member (key: the quoted
// name, nil for an array element) with the extent of its value.
func (s *jsonScanner) elements(depth int, fn func(key []byte, vs, ve int)) bool {
	obj := s.b[s.i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closer {
		s.i++
		return true
	}
	for {
		s.ws()
		var key []byte
		if obj {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return false
			}
			ks := s.i
			if !s.str() {
				return false
			}
			key = s.b[ks:s.i]
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			s.ws()
		}
		vs, ve, ok := s.value(depth + 1)
		if !ok {
			return false
		}
		if fn != nil {
			fn(key, vs, ve)
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case closer:
			s.i++
			return true
		default:
			return false
		}
	}
}

// whole walks the container at s.i with fn and reports whether it is
// well formed and ends the scanned extent (trailing space aside).
func (s *jsonScanner) whole(fn func(key []byte, vs, ve int)) bool {
	if s.i >= len(s.b) || (s.b[s.i] != '{' && s.b[s.i] != '[') || !s.elements(0, fn) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

// member finds key in the object or array starting at s.i (already known
// to be a well-formed value ending at len(s.b)).
func (s *jsonScanner) member(key string) (start, end int, ok bool) {
	if s.i >= len(s.b) {
		return 0, 0, false
	}
	switch s.b[s.i] {
	case '{':
		return s.objectMember(key)
	case '[':
		idx, err := strconv.Atoi(key)
		if err != nil || idx < 0 || strconv.Itoa(idx) != key {
			return 0, 0, false
		}
		return s.arrayElement(idx)
	}
	return 0, 0, false
}

// objectMember returns the extent of the last member named key.
func (s *jsonScanner) objectMember(key string) (start, end int, ok bool) {
	found := false
	if !s.whole(func(k []byte, vs, ve int) {
		if keyEquals(k, key) {
			start, end, found = vs, ve, true
		}
	}) {
		return 0, 0, false
	}
	return start, end, found
}

// arrayElement returns the extent of element idx.
func (s *jsonScanner) arrayElement(idx int) (start, end int, ok bool) {
	n, found := 0, false
	if !s.whole(func(_ []byte, vs, ve int) {
		if n == idx {
			start, end, found = vs, ve, true
		}
		n++
	}) {
		return 0, 0, false
	}
	return start, end, found
}

// keyEquals reports whether the quoted JSON string raw names key.
func keyEquals(raw []byte, key string) bool {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return false
	}
	return k == key
}

// jsonText returns a JSON scalar as text: a string's content (unescaped),
// a number's literal or true/false; "" for null, objects, arrays and
// anything malformed.
func jsonText(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return string(inner)
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case '{', '[', 'n':
		return ""
	}
	if json.Valid(raw) {
		return string(raw)
	}
	return ""
}

// jsonField is jsonText of the value at path in doc.
func jsonField(doc []byte, path ...string) string { return jsonText(jsonValue(doc, path...)) }

// maxTopKeys bounds the member names topLevelKeys returns.
const maxTopKeys = 64

// topLevelKeys returns the member names of the JSON object doc, in order,
// at most maxTopKeys; nil when doc is not a well-formed object.
func topLevelKeys(doc []byte) []string {
	s := jsonScanner{b: doc}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return nil
	}
	var keys []string
	if !s.whole(func(k []byte, _, _ int) {
		if len(keys) < maxTopKeys {
			keys = append(keys, jsonText(k))
		}
	}) {
		return nil
	}
	return keys
}

// dropMembers returns the JSON object doc without its top-level members
// named in names (every occurrence), and whether any was removed; doc
// itself when it is not a well-formed object or has none of them.
func dropMembers(doc []byte, names []string) ([]byte, bool) {
	s := jsonScanner{b: doc}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return doc, false
	}
	out := []byte{'{'}
	removed := false
	if !s.whole(func(k []byte, vs, ve int) {
		if slices.Contains(names, jsonText(k)) {
			removed = true
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), doc[vs:ve]...)
	}) || !removed {
		return doc, false
	}
	return append(out, '}'), true
}
