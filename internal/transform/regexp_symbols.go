package transform

import (
	"math"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// goja runs RegExp.prototype[Symbol.replace], [Symbol.split] and
// [Symbol.match], and the iterator of [Symbol.matchAll], as native loops
// over exec that neither the interrupt nor a size check reaches: a call
// straight to /a/g[Symbol.replace](s, "$'") on a 30 KB payload built a
// 1.4 GiB string long after its call was given up, a [Symbol.match]
// receiver whose exec never returns null allocated until the process was
// killed, and a receiver that is not a RegExp made [Symbol.split] and
// [Symbol.matchAll] compile its text with goja's own constructor, which
// the sandbox's pattern check never sees. So the sandbox replaces them
// with the specification's algorithms (ECMA-262 22.2.6.8 to 22.2.6.14),
// written here with its bounds. They are what goja runs in this sandbox
// anyway, since replacing exec switches it to its generic paths:
//
//   - every step of a loop over matches goes through regExpExec, which
//     throws once the call is stopped (time, memory or cancellation), so
//     no loop runs on after the watchdog gave up on the call;
//   - every element collected (matches, split parts, captures) counts
//     against the element cap, and every character of a replacement
//     result against the string cap before it is written, whatever exec
//     returns;
//   - a matcher built from the receiver (split, matchAll) comes from the
//     receiver's species constructor or, by default, from the sandbox's
//     checked RegExp constructor (harden.go).
//
// The String.prototype methods that hand an object argument to its symbol
// method (replace, replaceAll, split, match, matchAll, search) are
// replaced too, so that the method they call is the one they looked up
// (a getter cannot show a check one method and the call another), and a
// pattern they compile from text is checked first. Their own bounds
// (string patterns and separators) are in guard.go.
//
// One difference is visible to scripts: a [Symbol.matchAll] iterator is
// an ordinary iterator object with its own next method instead of a
// %RegExpStringIteratorPrototype% object.

// installRegExpSymbols replaces the looping RegExp.prototype symbol
// methods and the String.prototype methods that dispatch to them.
// iteratorProto is %IteratorPrototype%.
func (g *guard) installRegExpSymbols(regExpProto, str, iteratorProto *goja.Object) {
	g.iteratorProto = iteratorProto
	g.execObj, _ = regExpProto.Get("exec").(*goja.Object)
	g.defineSymbol(regExpProto, goja.SymReplace, "[Symbol.replace]", 2, g.symbolReplace)
	g.defineSymbol(regExpProto, goja.SymSplit, "[Symbol.split]", 2, g.symbolSplit)
	g.defineSymbol(regExpProto, goja.SymMatch, "[Symbol.match]", 1, g.symbolMatch)
	g.defineSymbol(regExpProto, goja.SymMatchAll, "[Symbol.matchAll]", 1, g.symbolMatchAll)

	for _, m := range []struct {
		name string
		all  bool
	}{{"replace", false}, {"replaceAll", true}} {
		if orig, ok := goja.AssertFunction(str.Get(m.name)); ok {
			g.define(str, m.name, g.rt.ToValue(2), g.stringReplace(m.name, m.all, orig))
		}
	}
	if orig, ok := goja.AssertFunction(str.Get("split")); ok {
		g.define(str, "split", g.rt.ToValue(2), g.stringSplit(orig))
	}
	g.define(str, "match", g.rt.ToValue(1), g.stringMatcher("match", goja.SymMatch, ""))
	g.define(str, "matchAll", g.rt.ToValue(1), g.stringMatcher("matchAll", goja.SymMatchAll, "g"))
	g.define(str, "search", g.rt.ToValue(1), g.stringMatcher("search", goja.SymSearch, ""))
}

// invoke calls fn and rethrows what it throws.
func (g *guard) invoke(fn goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := fn(this, args...)
	if err != nil {
		panic(err)
	}
	if v == nil {
		return goja.Undefined()
	}
	return v
}

// construct is Construct(c, args), rethrowing what it throws.
func (g *guard) construct(c goja.Value, args ...goja.Value) *goja.Object {
	o, err := g.rt.New(c, args...)
	if err != nil {
		panic(err)
	}
	return o
}

// setProp is Set(o, name, v, true).
func (g *guard) setProp(o *goja.Object, name string, v any) {
	if err := o.Set(name, v); err != nil {
		panic(err)
	}
}

// get is Get(o, name), undefined for a missing property.
func get(o *goja.Object, name string) goja.Value {
	if v := o.Get(name); v != nil {
		return v
	}
	return goja.Undefined()
}

// thisObject returns the receiver of a RegExp method, which must be an
// object.
func (g *guard) thisObject(fc goja.FunctionCall, what string) *goja.Object {
	o, ok := objectArg(fc.This)
	if !ok {
		panic(g.rt.NewTypeError(what + " called on a non-object"))
	}
	return o
}

// requireCoercible throws the TypeError of a String method called on null
// or undefined.
func (g *guard) requireCoercible(this goja.Value, what string) {
	if this == nil || goja.IsUndefined(this) || goja.IsNull(this) {
		panic(g.rt.NewTypeError(what + " called on null or undefined"))
	}
}

// method is GetMethod(o, sym): nil when undefined or null.
func (g *guard) method(o *goja.Object, sym *goja.Symbol) goja.Callable {
	v := o.GetSymbol(sym)
	if isUndef(v) || goja.IsNull(v) {
		return nil
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		panic(g.rt.NewTypeError(sym.String() + " is not a function"))
	}
	return fn
}

// isRegExp is IsRegExp(o).
func isRegExp(o *goja.Object) bool {
	if m := o.GetSymbol(goja.SymMatch); !isUndef(m) {
		return m.ToBoolean()
	}
	return o.ClassName() == "RegExp"
}

// flagsOf is ToString(Get(rx, "flags")).
func flagsOf(rx *goja.Object) string {
	return toStr(get(rx, "flags")).String()
}

// regExpExec is the specification's RegExpExec: rx's exec method, or the
// built-in one for a RegExp without one, with the result checked; nil for
// null. Every loop over matches calls it per step, so it refuses to run
// once the call is stopped.
func (g *guard) regExpExec(rx *goja.Object, s goja.String) *goja.Object {
	res, _ := g.regExpExecFrom(rx, s)
	return res
}

// regExpExecFrom is regExpExec that also reports whether the result came
// from the built-in exec, so is a fresh array of data properties whose
// reading no script can observe.
func (g *guard) regExpExecFrom(rx *goja.Object, s goja.String) (*goja.Object, bool) {
	g.checkStopped()
	execVal := rx.Get("exec")
	var res goja.Value
	builtin := execVal != nil && execVal.SameAs(g.execObj)
	fn, callable := goja.AssertFunction(execVal)
	switch {
	case builtin || !callable && rx.ClassName() == "RegExp":
		res, builtin = g.timedExec(goja.FunctionCall{This: rx, Arguments: []goja.Value{s}}), true
	case callable:
		res = g.invoke(fn, rx, s)
	default:
		panic(g.rt.NewTypeError("RegExp exec method called on an object that is not a RegExp"))
	}
	if goja.IsNull(res) {
		return nil, builtin
	}
	o, ok := res.(*goja.Object)
	if !ok {
		panic(g.rt.NewTypeError("RegExp exec method returned something other than an Object or null"))
	}
	return o, builtin
}

// speciesConstructor is SpeciesConstructor(o, %RegExp%), with the
// sandbox's checked constructor as %RegExp%.
func (g *guard) speciesConstructor(o *goja.Object) goja.Value {
	def := goja.Value(g.regExpCtor)
	if g.regExpCtor == nil {
		def = g.regExp
	}
	c := get(o, "constructor")
	if goja.IsUndefined(c) {
		return def
	}
	co, ok := objectArg(c)
	if !ok {
		panic(g.rt.NewTypeError("object.constructor is not an object"))
	}
	s := co.GetSymbol(goja.SymSpecies)
	if isUndef(s) || goja.IsNull(s) {
		return def
	}
	if _, ok := goja.AssertConstructor(s); !ok {
		panic(g.rt.NewTypeError("object.constructor[Symbol.species] is not a constructor"))
	}
	return s
}

// advanceIndex is AdvanceStringIndex(s, i, unicode).
func advanceIndex(s goja.String, i int64, unicode bool) int64 {
	if !unicode || i+1 >= int64(s.Length()) {
		return i + 1
	}
	if c := s.CharAt(int(i)); c >= 0xD800 && c <= 0xDBFF {
		if d := s.CharAt(int(i + 1)); d >= 0xDC00 && d <= 0xDFFF {
			return i + 2
		}
	}
	return i + 1
}

// advanceLastIndex moves rx.lastIndex past an empty match.
func (g *guard) advanceLastIndex(rx *goja.Object, s goja.String, unicode bool) {
	i := int64(toLength(get(rx, "lastIndex")))
	g.setProp(rx, "lastIndex", advanceIndex(s, i, unicode))
}

// isUnicode reports the flags that make an empty match advance by code
// points.
func isUnicode(flags string) bool { return strings.ContainsAny(flags, "uv") }

// globalMatches is the loop of a global match or replace: from lastIndex
// 0, every result of exec until null, each counted against the element
// cap, an empty match advancing lastIndex.
func (g *guard) globalMatches(rx *goja.Object, s goja.String, unicode bool, what string, each func(res *goja.Object, builtin bool, matched goja.String)) {
	g.setProp(rx, "lastIndex", 0)
	for n := 1; ; n++ {
		res, builtin := g.regExpExecFrom(rx, s)
		if res == nil {
			return
		}
		g.checkElems(what, float64(n))
		matched := toStr(get(res, "0"))
		each(res, builtin, matched)
		if matched.Length() == 0 {
			g.advanceLastIndex(rx, s, unicode)
		}
	}
}

// symbolMatch is RegExp.prototype[Symbol.match].
func (g *guard) symbolMatch(fc goja.FunctionCall) goja.Value {
	const what = "RegExp.prototype[Symbol.match]"
	rx := g.thisObject(fc, what)
	s := toStr(fc.Argument(0))
	flags := flagsOf(rx)
	if !strings.Contains(flags, "g") {
		if res := g.regExpExec(rx, s); res != nil {
			return res
		}
		return goja.Null()
	}
	// at most one match per position, as String.prototype.split counts
	g.checkElems(what, float64(s.Length())+1)
	var found []any
	g.globalMatches(rx, s, isUnicode(flags), what, func(_ *goja.Object, _ bool, matched goja.String) {
		found = append(found, matched)
	})
	if len(found) == 0 {
		return goja.Null()
	}
	return g.rt.NewArray(found...)
}

// symbolMatchAll is RegExp.prototype[Symbol.matchAll]: the matcher is
// built by the species constructor (by default the checked one) and
// stepped one exec per next.
func (g *guard) symbolMatchAll(fc goja.FunctionCall) goja.Value {
	rx := g.thisObject(fc, "RegExp.prototype[Symbol.matchAll]")
	s := toStr(fc.Argument(0))
	c := g.speciesConstructor(rx)
	flags := toStr(get(rx, "flags"))
	matcher := g.construct(c, rx, flags)
	g.setProp(matcher, "lastIndex", toLength(get(rx, "lastIndex")))
	global, unicode := strings.Contains(flags.String(), "g"), isUnicode(flags.String())
	done := false
	next := func(goja.FunctionCall) goja.Value {
		if done {
			return g.iterResult(goja.Undefined(), true)
		}
		res := g.regExpExec(matcher, s)
		switch {
		case res == nil:
			done = true
			return g.iterResult(goja.Undefined(), true)
		case !global:
			done = true
		case toStr(get(res, "0")).Length() == 0:
			g.advanceLastIndex(matcher, s, unicode)
		}
		return g.iterResult(res, false)
	}
	it := g.rt.CreateObject(g.iteratorProto)
	_ = it.DefineDataProperty("next", g.native("next", g.rt.ToValue(0), next), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = it.DefineDataPropertySymbol(goja.SymToStringTag, g.rt.ToValue("RegExp String Iterator"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return it
}

// iterResult is CreateIterResultObject(v, done).
func (g *guard) iterResult(v goja.Value, done bool) goja.Value {
	o := g.rt.NewObject()
	_ = o.Set("value", v)
	_ = o.Set("done", done)
	return o
}

// symbolSplit is RegExp.prototype[Symbol.split]: a sticky splitter from
// the species constructor (by default the checked one) tried at every
// position, each part and capture counted against the element cap.
func (g *guard) symbolSplit(fc goja.FunctionCall) goja.Value {
	const what = "RegExp.prototype[Symbol.split]"
	rx := g.thisObject(fc, what)
	s := toStr(fc.Argument(0))
	c := g.speciesConstructor(rx)
	flags := flagsOf(rx)
	unicode := isUnicode(flags)
	newFlags := flags
	if !strings.Contains(flags, "y") {
		newFlags += "y"
	}
	splitter := g.construct(c, rx, g.rt.ToValue(newFlags))
	lim := uint32(math.MaxUint32)
	if limit := fc.Argument(1); !isUndef(limit) {
		lim = toUint32(limit)
	}
	if lim == 0 {
		return g.rt.NewArray()
	}
	size := s.Length()
	// a part per position, as String.prototype.split counts (captures
	// are counted as they come)
	g.checkElems(what, min(float64(lim), float64(size)+1))
	var parts []any
	if size == 0 {
		if g.regExpExec(splitter, s) != nil {
			return g.rt.NewArray()
		}
		return g.rt.NewArray(s)
	}
	// push reports whether the limit is reached.
	push := func(v goja.Value) bool {
		parts = append(parts, v)
		g.checkElems(what, float64(len(parts)))
		return uint32(len(parts)) == lim
	}
	p, q := 0, 0
	for q < size {
		g.setProp(splitter, "lastIndex", q)
		z := g.regExpExec(splitter, s)
		if z == nil {
			q = int(advanceIndex(s, int64(q), unicode))
			continue
		}
		e := int(min(toLength(get(splitter, "lastIndex")), float64(size)))
		if e == p {
			q = int(advanceIndex(s, int64(q), unicode))
			continue
		}
		if push(s.Substring(p, q)) {
			return g.rt.NewArray(parts...)
		}
		p = e
		captures := max(toLength(get(z, "length"))-1, 0)
		for i := 1; float64(i) <= captures; i++ {
			if push(get(z, strconv.Itoa(i))) {
				return g.rt.NewArray(parts...)
			}
		}
		q = p
	}
	push(s.Substring(p, size))
	return g.rt.NewArray(parts...)
}

// toUint32 is ECMAScript ToUint32.
func toUint32(v goja.Value) uint32 {
	f := v.ToFloat()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return uint32(int64(math.Mod(math.Trunc(f), 1<<32)))
}

// boundedString builds a result string whose every write is checked
// against the string cap first.
type boundedString struct {
	g    *guard
	what string
	size float64
	b    goja.StringBuilder
}

func (o *boundedString) grow(n int) {
	o.size += float64(n)
	o.g.checkChars(o.what, o.size)
}

// str appends s.
func (o *boundedString) str(s goja.String) {
	o.grow(s.Length())
	o.b.WriteString(s)
}

// sub appends s[i:j].
func (o *boundedString) sub(s goja.String, i, j int) {
	if j > i {
		o.grow(j - i)
		o.b.WriteSubstring(s, i, j)
	}
}

// symbolReplace is RegExp.prototype[Symbol.replace].
func (g *guard) symbolReplace(fc goja.FunctionCall) goja.Value {
	rx := g.thisObject(fc, "RegExp.prototype[Symbol.replace]")
	return g.replaceMatches(rx, toStr(fc.Argument(0)), fc.Argument(1))
}

// replaceMatches replaces the matches of rx in s by replaceValue (a
// function or a template with $ references). Replacer results and
// substitutions are written straight into a bounded result, so a
// template of $' or $` per match is refused at the string cap instead of
// built. The specification collects every match before it replaces any;
// a template's substitution for a result of the built-in exec is made as
// the result comes instead, which no script can tell apart, so the cap
// stops the loop early rather than after every match was collected.
func (g *guard) replaceMatches(rx *goja.Object, s goja.String, replaceValue goja.Value) goja.Value {
	const what = "RegExp.prototype[Symbol.replace]"
	r := &replacement{g: g, s: s, out: boundedString{g: g, what: what}}
	r.fn, r.functional = goja.AssertFunction(replaceValue)
	if !r.functional {
		r.template = toStr(replaceValue)
	}
	flags := flagsOf(rx)
	var deferred []*goja.Object
	take := func(res *goja.Object, builtin bool) {
		if builtin && !r.functional && deferred == nil {
			r.apply(res)
		} else {
			deferred = append(deferred, res)
		}
	}
	if strings.Contains(flags, "g") {
		g.globalMatches(rx, s, isUnicode(flags), what, func(res *goja.Object, builtin bool, _ goja.String) {
			take(res, builtin)
		})
	} else if res, builtin := g.regExpExecFrom(rx, s); res != nil {
		take(res, builtin)
	}
	for _, res := range deferred {
		g.checkStopped()
		r.apply(res)
	}
	if sl := s.Length(); r.next < sl {
		r.out.sub(s, r.next, sl)
	}
	return r.out.b.String()
}

// replacement is the state of one replaceMatches.
type replacement struct {
	g          *guard
	s          goja.String
	fn         goja.Callable
	functional bool
	template   goja.String
	out        boundedString
	next       int // nextSourcePosition
}

// apply replaces one match result (the specification's loop body).
func (r *replacement) apply(res *goja.Object) {
	g, s := r.g, r.s
	n := max(toLength(get(res, "length"))-1, 0)
	g.checkElems(r.out.what, n)
	matched := toStr(get(res, "0"))
	position := clampIndex(get(res, "index"), s.Length())
	captures := make([]goja.Value, 0, int(n)+4)
	captures = append(captures, matched)
	for i := 1; float64(i) <= n; i++ {
		c := get(res, strconv.Itoa(i))
		if !goja.IsUndefined(c) {
			c = toStr(c)
		}
		captures = append(captures, c)
	}
	groups := get(res, "groups")
	if r.functional {
		args := append(captures, g.rt.ToValue(position), s)
		if !goja.IsUndefined(groups) {
			args = append(args, groups)
		}
		repl := toStr(g.invoke(r.fn, goja.Undefined(), args...))
		if position >= r.next {
			r.out.sub(s, r.next, position)
			r.out.str(repl)
			r.next = position + matched.Length()
		}
		return
	}
	if position >= r.next {
		var named *goja.Object
		if !goja.IsUndefined(groups) {
			named = groups.ToObject(g.rt)
		}
		r.out.sub(s, r.next, position)
		g.substitute(&r.out, s, position, captures, named, r.template)
		r.next = position + matched.Length()
	}
}

// clampIndex is ToIntegerOrInfinity(v) clamped to [0, n].
func clampIndex(v goja.Value, n int) int {
	f := v.ToFloat()
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0
	case f >= float64(n):
		return n
	}
	return int(f)
}

// substitute writes GetSubstitution(matched, s, position, captures,
// named, template) to out: $$, $&, $`, $', $n, $nn and $<name>; any other
// $ is literal. captures[0] is the matched string.
func (g *guard) substitute(out *boundedString, s goja.String, position int, captures []goja.Value, named *goja.Object, t goja.String) {
	matched := captures[0].(goja.String)
	sl, tl, m := s.Length(), t.Length(), len(captures)-1
	capture := func(i int) {
		if c := captures[i]; !goja.IsUndefined(c) {
			out.str(c.(goja.String))
		}
	}
	lit := 0 // start of the literal text not yet written
	for i := 0; i+1 < tl; i++ {
		if t.CharAt(i) != '$' {
			continue
		}
		ref := 0 // length of the reference at i; 0 for a literal $
		var write func()
		switch c := t.CharAt(i + 1); {
		case c == '$':
			ref, write = 2, func() { out.sub(t, i, i+1) }
		case c == '&':
			ref, write = 2, func() { out.str(matched) }
		case c == '`':
			ref, write = 2, func() { out.sub(s, 0, position) }
		case c == '\'':
			ref, write = 2, func() { out.sub(s, min(position+matched.Length(), sl), sl) }
		case c >= '0' && c <= '9':
			idx := int(c - '0')
			if i+2 < tl {
				if d := t.CharAt(i + 2); d >= '0' && d <= '9' && idx*10+int(d-'0') >= 1 && idx*10+int(d-'0') <= m {
					ref, idx = 3, idx*10+int(d-'0')
				}
			}
			if ref == 0 && idx >= 1 && idx <= m {
				ref = 2
			}
			write = func() { capture(idx) }
		case c == '<' && named != nil:
			gt := -1
			for j := i + 2; j < tl; j++ {
				if t.CharAt(j) == '>' {
					gt = j
					break
				}
			}
			if gt >= 0 {
				name := t.Substring(i+2, gt).String()
				ref, write = gt-i+1, func() {
					if v := get(named, name); !goja.IsUndefined(v) {
						out.str(toStr(v))
					}
				}
			}
		}
		if ref == 0 {
			continue
		}
		out.sub(t, lit, i)
		write()
		lit = i + ref
		i += ref - 1
	}
	out.sub(t, lit, tl)
}

// stringReplace returns String.prototype.replace or replaceAll: an object
// pattern with a [Symbol.replace] method is handed to it; anything else
// is a string pattern, replaced by the original built-in once the
// result's size is known to be within the cap.
func (g *guard) stringReplace(name string, all bool, orig goja.Callable) func(goja.FunctionCall) goja.Value {
	what := "String.prototype." + name
	return func(fc goja.FunctionCall) goja.Value {
		g.requireCoercible(fc.This, what)
		pattern, repl := fc.Argument(0), fc.Argument(1)
		if o, ok := objectArg(pattern); ok {
			if all && isRegExp(o) {
				flags := get(o, "flags")
				if goja.IsUndefined(flags) || goja.IsNull(flags) {
					panic(g.rt.NewTypeError(what + ": the flags of the RegExp argument are null or undefined"))
				}
				if !strings.Contains(toStr(flags).String(), "g") {
					panic(g.rt.NewTypeError(what + " called with a non-global RegExp argument"))
				}
			}
			if m := g.method(o, goja.SymReplace); m != nil {
				return g.invoke(m, o, fc.This, repl)
			}
		}
		s, p := toStr(fc.This), toStr(pattern)
		sl := float64(s.Length())
		if all && p.Length() == 0 {
			// goja's replaceAll("") never terminates on a non-ASCII
			// subject; a global empty regexp matches the same places.
			return g.replaceMatches(g.construct(g.regExp, g.rt.ToValue(""), g.rt.ToValue("g")), s, repl)
		}
		occ := 1.0
		if all {
			occ = float64(strings.Count(s.String(), p.String()))
		}
		if fn, ok := goja.AssertFunction(repl); ok {
			var acc float64
			wrapped := g.rt.ToValue(func(c goja.FunctionCall) goja.Value {
				out := toStr(g.invoke(fn, c.This, c.Arguments...))
				acc += float64(out.Length())
				g.checkChars(what, sl+acc)
				return out
			})
			return g.invoke(orig, s, p, wrapped)
		}
		rs := toStr(repl)
		per := float64(rs.Length()) + float64(strings.Count(rs.String(), "$"))*sl
		g.checkChars(what, sl+occ*per)
		return g.invoke(orig, s, p, rs)
	}
}

// stringSplit returns String.prototype.split: an object separator with a
// [Symbol.split] method is handed to it; anything else is a string
// separator, split by the original built-in once the number of parts is
// known to be within the cap.
func (g *guard) stringSplit(orig goja.Callable) func(goja.FunctionCall) goja.Value {
	const what = "String.prototype.split"
	return func(fc goja.FunctionCall) goja.Value {
		g.requireCoercible(fc.This, what)
		sep, limit := fc.Argument(0), fc.Argument(1)
		if o, ok := objectArg(sep); ok {
			if m := g.method(o, goja.SymSplit); m != nil {
				return g.invoke(m, o, fc.This, limit)
			}
		}
		s := toStr(fc.This)
		n := math.Inf(1)
		if !isUndef(limit) {
			lim := toUint32(limit)
			limit, n = g.rt.ToValue(lim), float64(lim)
		}
		if isUndef(sep) {
			return g.invoke(orig, s, sep, limit)
		}
		p := toStr(sep)
		parts := float64(s.Length())
		if p.Length() > 0 {
			parts = float64(strings.Count(s.String(), p.String())) + 1
		}
		g.checkElems(what, min(n, parts))
		return g.invoke(orig, s, p, limit)
	}
}

// stringMatcher returns String.prototype.match, matchAll or search: an
// object argument with a method for sym is handed to it; anything else is
// a pattern, checked and compiled with flags, whose method for sym runs.
func (g *guard) stringMatcher(name string, sym *goja.Symbol, flags string) func(goja.FunctionCall) goja.Value {
	what := "String.prototype." + name
	return func(fc goja.FunctionCall) goja.Value {
		g.requireCoercible(fc.This, what)
		arg := fc.Argument(0)
		if o, ok := objectArg(arg); ok {
			if flags == "g" && isRegExp(o) {
				f := get(o, "flags")
				if goja.IsUndefined(f) || goja.IsNull(f) {
					panic(g.rt.NewTypeError(what + ": the flags of the RegExp argument are null or undefined"))
				}
				if !strings.Contains(toStr(f).String(), "g") {
					panic(g.rt.NewTypeError(what + " called with a non-global RegExp argument"))
				}
			}
			if m := g.method(o, sym); m != nil {
				return g.invoke(m, o, fc.This)
			}
		}
		s := toStr(fc.This)
		pattern := g.rt.ToValue("")
		if !isUndef(arg) {
			pattern = g.refusePattern(toStr(arg))
		}
		args := []goja.Value{pattern}
		if flags != "" {
			args = append(args, g.rt.ToValue(flags))
		}
		rx := g.construct(g.regExp, args...)
		m := g.method(rx, sym)
		if m == nil {
			panic(g.rt.NewTypeError("RegExp.prototype[" + sym.String() + "] is not a function"))
		}
		return g.invoke(m, rx, s)
	}
}
