package tmpl

import "errors"

// Path is a pre-split reference path such as "messages[0].subject".
// The zero Path has no segments and never resolves.
type Path struct {
	segs    []segment
	blocked bool
}

// segment is one step of a Path: an object key, and the array index the
// same text denotes (-1 when it is not a canonical index).
type segment struct {
	key   string
	index int
}

// errEmptyPath is returned by ParsePath for a path with no segments.
var errEmptyPath = errors.New("empty path")

// ParsePath splits path once so that lookups do no parsing. It fails only
// for a path with no segments ("", ".", "[]").
func ParsePath(path string) (Path, error) {
	var p Path
	for seg, rest, ok := nextSegment(path); ok; seg, rest, ok = nextSegment(rest) {
		if isBlockedKey(seg) {
			p.blocked = true
		}
		p.segs = append(p.segs, segment{key: seg, index: arrayIndex(seg)})
	}
	if len(p.segs) == 0 {
		return Path{}, errEmptyPath
	}
	return p, nil
}

// Lookup resolves p against root; ok is false when the value is missing or
// the path is blocked. A JSON null that is present yields (nil, true).
func (p Path) Lookup(root any) (any, bool) {
	if p.blocked || len(p.segs) == 0 {
		return nil, false
	}
	cur := root
	for i := range p.segs {
		var ok bool
		if cur, ok = step(cur, p.segs[i].key, p.segs[i].index); !ok {
			return nil, false
		}
	}
	return cur, true
}

// lookupVars resolves p against v's payload, seen through v.Element.
func (p Path) lookupVars(v *Vars) (any, bool) {
	if v.Element.Key == "" || p.blocked || len(p.segs) == 0 || p.segs[0].key != v.Element.Key {
		return p.Lookup(v.Payload)
	}
	return Path{segs: p.segs[1:]}.lookupFrom(v.Element.Value)
}

// lookupFrom walks every segment of p from cur (none: cur itself).
func (p Path) lookupFrom(cur any) (any, bool) {
	for i := range p.segs {
		var ok bool
		if cur, ok = step(cur, p.segs[i].key, p.segs[i].index); !ok {
			return nil, false
		}
	}
	return cur, true
}

// step descends one level from v by key (objects) or index (arrays).
func step(v any, key string, index int) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		next, ok := c[key]
		return next, ok
	case []any:
		if index < 0 || index >= len(c) {
			return nil, false
		}
		return c[index], true
	}
	return nil, false
}

// nextSegment returns the first non-empty segment of s, split on '.', '['
// and ']', and the text after it.
func nextSegment(s string) (seg, rest string, ok bool) {
	i := 0
	for i < len(s) && isPathSep(s[i]) {
		i++
	}
	if i == len(s) {
		return "", "", false
	}
	j := i
	for j < len(s) && !isPathSep(s[j]) {
		j++
	}
	return s[i:j], s[j:], true
}

func isPathSep(c byte) bool { return c == '.' || c == '[' || c == ']' }

// arrayIndex returns the array index seg denotes, or -1 unless seg is a
// canonical non-negative decimal integer that fits an int.
func arrayIndex(seg string) int {
	if seg == "" || len(seg) > 1 && seg[0] == '0' || len(seg) > 9 {
		// More than 9 digits exceeds any array a bounded body can hold.
		return -1
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// isBlockedKey reports the names that never resolve, after the reference
// gateway's guard against prototype pollution.
func isBlockedKey(s string) bool {
	return s == "__proto__" || s == "prototype" || s == "constructor"
}
