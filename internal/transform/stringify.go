package transform

import (
	"math"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// wrapStringify replaces JSON.stringify by a version that passes the
// original a replacer charging every value to a size budget as it is
// serialised, so shared sub-structures (an array holding itself a million
// times over) cannot expand into gigabytes inside the native serializer.
// The charge per value is its key, its scalar text and the indentation at
// its depth, tracked through the holder chain the serializer reports.
//
// A user replacer function is chained; a user property-list replacer is
// emulated by filtering keys of non-array holders, which keeps the right
// properties but in the object's own order instead of the list's.
func (g *guard) wrapStringify(json *goja.Object) {
	origVal := json.Get("stringify")
	orig, _ := goja.AssertFunction(origVal)
	g.define(json, "stringify", origVal.ToObject(g.rt).Get("length"), func(fc goja.FunctionCall) goja.Value {
		acct := &stringifyAccount{g: g, gap: gapLength(fc.Argument(2))}
		switch r := fc.Argument(1).(type) {
		case *goja.Object:
			if fn, ok := goja.AssertFunction(r); ok {
				acct.user = fn
			} else if r.ClassName() == "Array" {
				acct.allow = allowList(r)
			}
		}
		v, err := orig(fc.This, fc.Argument(0), g.rt.ToValue(acct.replace), fc.Argument(2))
		if err != nil {
			panic(err)
		}
		return v
	})
}

// stringifyAccount is the state of one guarded JSON.stringify call.
type stringifyAccount struct {
	g       *guard
	gap     float64
	user    goja.Callable
	allow   map[string]bool
	holders []*goja.Object
	used    float64
	started bool
}

// replace is the replacer handed to the original serializer.
func (a *stringifyAccount) replace(fc goja.FunctionCall) goja.Value {
	holder, _ := objectArg(fc.This)
	key, val := fc.Argument(0), fc.Argument(1)
	root := !a.started
	a.started = true
	if a.user != nil {
		v, err := a.user(fc.This, key, val)
		if err != nil {
			panic(err)
		}
		val = v
	}
	if a.allow != nil && !root && holder != nil && holder.ClassName() != "Array" && !a.allow[key.String()] {
		return goja.Undefined()
	}
	for len(a.holders) > 0 && a.holders[len(a.holders)-1] != holder {
		a.holders = a.holders[:len(a.holders)-1]
	}
	depth := float64(len(a.holders))
	if depth > maxNesting {
		a.g.throwRange("JSON.stringify: nesting deeper than 1000")
	}
	a.used += quotedLength(toStr(key)) + 2 + a.gap*(depth+1)
	switch v := val.(type) {
	case goja.String:
		a.used += quotedLength(v)
	case *goja.Object:
		if _, callable := goja.AssertFunction(v); !callable {
			a.used += 2
			a.holders = append(a.holders, v)
		}
	default:
		a.used += 24
	}
	a.g.checkChars("JSON.stringify", a.used)
	return val
}

// quotedLength is the length of s as a JSON string, quotes included: a
// control character takes six characters (\u0001), a quote, backslash or
// common control two; a lone surrogate six.
func quotedLength(s goja.String) float64 {
	n := 2.0
	if str, ok := asciiText(s); ok {
		for i := 0; i < len(str); i++ {
			n += quotedUnit(uint16(str[i]))
		}
		return n
	}
	for i, l := 0, s.Length(); i < l; i++ {
		c := s.CharAt(i)
		if c >= 0xD800 && c <= 0xDBFF && i+1 < l {
			if d := s.CharAt(i + 1); d >= 0xDC00 && d <= 0xDFFF {
				n += 2 // a pair
				i++
				continue
			}
		}
		n += quotedUnit(c)
	}
	return n
}

// quotedUnit is the length of a UTF-16 code unit in a JSON string (a
// surrogate here is a lone one).
func quotedUnit(c uint16) float64 {
	switch {
	case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
		return 2
	case c < 0x20 || (c >= 0xD800 && c <= 0xDFFF):
		return 6
	}
	return 1
}

// gapLength is the indentation width JSON.stringify derives from space.
func gapLength(space goja.Value) float64 {
	if isUndef(space) || goja.IsNull(space) {
		return 0
	}
	if o, ok := objectArg(space); ok {
		switch o.ClassName() {
		case "Number":
			space = o.ToNumber()
		case "String":
			space = o.ToString()
		default:
			return 0
		}
	}
	if s, ok := space.(goja.String); ok {
		return math.Min(10, float64(s.Length()))
	}
	n := space.ToFloat()
	if math.IsNaN(n) {
		return 0
	}
	return math.Max(0, math.Min(10, math.Floor(n)))
}

// allowList collects a property-list replacer's names.
func allowList(list *goja.Object) map[string]bool {
	allow := make(map[string]bool)
	n := toLength(list.Get("length"))
	for i := 0; i < int(math.Min(n, float64(maxNesting*100))); i++ {
		e := list.Get(strconv.Itoa(i))
		switch v := e.(type) {
		case goja.String:
			allow[v.String()] = true
		case *goja.Object:
			if c := v.ClassName(); c == "String" || c == "Number" {
				allow[v.String()] = true
			}
		default:
			if f := e.ToFloat(); !math.IsNaN(f) && !isUndef(e) && !goja.IsNull(e) {
				if _, isBool := e.Export().(bool); !isBool {
					allow[strings.TrimSpace(e.String())] = true
				}
			}
		}
	}
	return allow
}
