package transform

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"

	"github.com/dop251/goja"
)

// maxNesting bounds recursion that built-ins perform in Go (join through
// nested arrays, JSON nesting), which the call-stack limit cannot see.
const maxNesting = 1000

// guard replaces the built-ins that can build a huge string or array in a
// single native step (which the interrupt cannot stop) with versions that
// first check the size of what they are about to build. A refusal stops
// the call with KindMemory even if the script catches the RangeError.
//
// Strings are measured in UTF-16 code units against MaxBytes, arrays in
// elements against MaxBytes/16. Bounds are conservative upper bounds, so a
// legitimate operation close to the cap may be refused.
//
// Guarded: String.prototype repeat, padStart, padEnd, concat, replace,
// replaceAll, split, match, matchAll, search and the RegExp.prototype
// symbol methods they call (regexp_symbols.go); normalize, the case
// conversions, encodeURIComponent, encodeURI and escape (textsize.go);
// BigInt (bigint.go); String.raw; Array.prototype join,
// toLocaleString, concat, flat and every method that walks the receiver's
// length natively (map, fill, indexOf, slice, sort, toSorted, …);
// Array.from; Function.prototype.apply, Reflect.apply/construct;
// Object.keys/values/entries/getOwnPropertyNames/assign on strings;
// JSON.stringify (size and nesting) and JSON.parse (nesting). Binary
// buffers are removed from the sandbox (sandbox.go).
//
// Syntax that loops natively is covered elsewhere: spreads and
// destructuring drive the built-in iterators, whose next methods throw
// once the call is stopped (stoppableIterators), and object spread and
// rest are compiled to script loops by the bundler (bundle.go).
type guard struct {
	rt          *goja.Runtime
	maxChars    int64
	maxElems    int64
	call        *call          // the running call; set before any script runs
	joining     []*goja.Object // arrays being joined, for cycle detection
	rangeError  *goja.Object
	syntaxError *goja.Object
	regExp      *goja.Object // goja's own RegExp constructor, for fixed or checked patterns

	// For the RegExp symbol methods (regexp_symbols.go).
	regExpCtor    *goja.Object                       // the checked RegExp constructor; set by newSandbox
	timedExec     func(goja.FunctionCall) goja.Value // the timed RegExp.prototype.exec (regexp.go)
	execObj       *goja.Object                       // and its function object
	iteratorProto *goja.Object                       // %IteratorPrototype%

	// For BigInt (bigint.go).
	maxBigIntBits int64      // the longest BigInt a call may build, in bits
	bigintOps     goja.Value // the checked operations the bundle's wrapper receives
}

// fail refuses an operation that would exceed a cap.
func (g *guard) fail(what string, need float64, limit int64) {
	msg := fmt.Sprintf("memory limit: %s would need %.0f, limit %d", what, need, limit)
	g.call.detail = msg
	g.call.stop(reasonMemory)
	g.throwRange(msg)
}

// throwRange throws a RangeError into the script.
func (g *guard) throwRange(msg string) {
	obj, err := g.rt.New(g.rangeError, g.rt.ToValue(msg))
	if err != nil {
		panic(err)
	}
	panic(obj)
}

// checkChars refuses a string result longer than the cap.
func (g *guard) checkChars(what string, n float64) {
	if n > float64(g.maxChars) {
		g.fail(what, n, g.maxChars)
	}
}

// checkElems refuses an array (or argument list) longer than the cap.
func (g *guard) checkElems(what string, n float64) {
	if n > float64(g.maxElems) {
		g.fail(what, n, g.maxElems)
	}
}

// precheck inspects a call before the original built-in runs; it may
// return replacement arguments (already converted values) or nil.
type precheck func(fc goja.FunctionCall) []goja.Value

// wrap replaces obj[name] by a function that runs check and then the
// original, keeping name, length and non-enumerability.
func (g *guard) wrap(obj *goja.Object, name string, check precheck) {
	origVal := obj.Get(name)
	orig, ok := goja.AssertFunction(origVal)
	if !ok {
		return
	}
	g.define(obj, name, origVal.ToObject(g.rt).Get("length"), func(fc goja.FunctionCall) goja.Value {
		args := fc.Arguments
		if repl := check(fc); repl != nil {
			args = repl
		}
		v, err := orig(fc.This, args...)
		if err != nil {
			panic(err)
		}
		return v
	})
}

// define installs a native replacement as a non-enumerable method. A Go
// runtime panic inside it (a bug) becomes a script error instead of
// unwinding through the runtime and killing the process.
func (g *guard) define(obj *goja.Object, name string, length goja.Value, fn func(goja.FunctionCall) goja.Value) {
	_ = obj.DefineDataProperty(name, g.native(name, length, fn), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// defineSymbol is define for a symbol-keyed method.
func (g *guard) defineSymbol(obj *goja.Object, sym *goja.Symbol, name string, length int, fn func(goja.FunctionCall) goja.Value) {
	_ = obj.DefineDataPropertySymbol(sym, g.native(name, g.rt.ToValue(length), fn), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// native returns fn as a function object with the given name and length.
func (g *guard) native(name string, length goja.Value, fn func(goja.FunctionCall) goja.Value) *goja.Object {
	safe := func(fc goja.FunctionCall) goja.Value {
		defer g.contain(name)
		return fn(fc)
	}
	f := g.rt.ToValue(safe).ToObject(g.rt)
	_ = f.DefineDataProperty("name", g.rt.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	if length != nil {
		_ = f.DefineDataProperty("length", length, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	return f
}

// gojaPkg is the import path of the runtime, whose own panic values
// (exceptions, interrupts, internal error kinds) must pass through.
var gojaPkg = reflect.TypeFor[goja.FunctionCall]().PkgPath()

// contain re-panics script-level throws and interrupts unchanged and
// turns any other panic into an Error thrown into the script.
func (g *guard) contain(name string) {
	x := recover()
	if x == nil {
		return
	}
	if t := reflect.TypeOf(x); t.PkgPath() == gojaPkg || (t.Kind() == reflect.Pointer && t.Elem().PkgPath() == gojaPkg) {
		panic(x) // a throw or an interrupt, which the runtime handles
	}
	panic(g.rt.NewGoError(fmt.Errorf("internal error in guarded %s", name)))
}

// install applies every guard to rt's pristine built-ins.
func (g *guard) install() {
	rt := g.rt
	g.rangeError = rt.Get("RangeError").ToObject(rt)
	g.syntaxError = rt.Get("SyntaxError").ToObject(rt)
	g.regExp = rt.Get("RegExp").ToObject(rt)
	proto := func(ctor string) *goja.Object {
		return rt.Get(ctor).ToObject(rt).Get("prototype").ToObject(rt)
	}
	str, arr := proto("String"), proto("Array")

	g.timeMatch(proto("RegExp"), "exec")
	g.timeMatch(proto("RegExp"), "test")
	iterators := g.stoppableIterators()
	g.installRegExpSymbols(proto("RegExp"), str, iterators[0].Prototype())

	g.wrap(str, "repeat", g.repeat)
	g.wrap(str, "padStart", g.pad)
	g.wrap(str, "padEnd", g.pad)
	g.wrap(str, "concat", g.concat)
	g.installTextSize(str, rt.GlobalObject())
	g.define(rt.Get("String").ToObject(rt), "raw", rt.ToValue(1), g.raw)

	g.define(arr, "join", rt.ToValue(1), func(fc goja.FunctionCall) goja.Value { return g.join(fc, false) })
	g.define(arr, "toLocaleString", rt.ToValue(0), func(fc goja.FunctionCall) goja.Value { return g.join(fc, true) })
	for _, m := range []string{"copyWithin", "every", "fill", "filter", "find", "findIndex", "findLast",
		"findLastIndex", "flatMap", "forEach", "includes", "indexOf", "lastIndexOf", "map", "reduce",
		"reduceRight", "reverse", "shift", "slice", "some", "sort", "splice", "unshift", "with",
		"toReversed", "toSorted", "toSpliced"} {
		g.wrap(arr, m, g.thisLength("Array.prototype."+m))
	}
	g.wrap(arr, "concat", g.concatArrays)
	g.wrap(arr, "flat", g.flat)
	g.wrap(rt.Get("Array").ToObject(rt), "from", g.arrayFrom)

	g.wrap(proto("Function"), "apply", g.argList("Function.prototype.apply", 1))
	reflect := rt.Get("Reflect").ToObject(rt)
	g.wrap(reflect, "apply", g.argList("Reflect.apply", 2))
	g.wrap(reflect, "construct", g.argList("Reflect.construct", 1))

	object := rt.Get("Object").ToObject(rt)
	for _, m := range []string{"keys", "values", "entries", "getOwnPropertyNames", "assign"} {
		g.wrap(object, m, g.stringKeys("Object."+m))
	}

	json := rt.Get("JSON").ToObject(rt)
	g.wrapStringify(json)
	g.wrap(json, "parse", g.parse)
}

// thisString returns ToString(this), or false when this is null or
// undefined (the original then throws its own TypeError).
func thisString(fc goja.FunctionCall) (goja.String, bool) {
	if fc.This == nil || goja.IsUndefined(fc.This) || goja.IsNull(fc.This) {
		return nil, false
	}
	return toStr(fc.This), true
}

// toStr is ToString as a goja.String (numbers and booleans convert to
// themselves in goja, so they are rendered through Go).
func toStr(v goja.Value) goja.String {
	if s, ok := v.ToString().(goja.String); ok {
		return s
	}
	return goja.StringFromUTF16(utf16.Encode([]rune(v.String())))
}

// toLength is the ECMAScript ToLength of v, as a float.
func toLength(v goja.Value) float64 {
	if v == nil {
		return 0
	}
	f := v.ToFloat()
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	return math.Min(math.Floor(f), 1<<53-1)
}

// isUndef reports a missing or undefined argument.
func isUndef(v goja.Value) bool { return v == nil || goja.IsUndefined(v) }

// objectArg returns v as an object when it is one (not a primitive).
func objectArg(v goja.Value) (*goja.Object, bool) {
	o, ok := v.(*goja.Object)
	return o, ok
}

// isClass reports whether v is an object of the given class.
func isClass(v goja.Value, class string) bool {
	o, ok := objectArg(v)
	return ok && o.ClassName() == class
}

func (g *guard) repeat(fc goja.FunctionCall) []goja.Value {
	if s, ok := thisString(fc); ok {
		n := fc.Argument(0).ToFloat()
		if n >= 1 && s.Length() > 0 {
			g.checkChars("String.prototype.repeat", float64(s.Length())*math.Floor(n))
		}
	}
	return nil
}

func (g *guard) pad(fc goja.FunctionCall) []goja.Value {
	if s, ok := thisString(fc); ok {
		if n := fc.Argument(0).ToFloat(); n > float64(s.Length()) {
			g.checkChars("String.prototype.padStart/padEnd", n)
		}
	}
	return nil
}

func (g *guard) concat(fc goja.FunctionCall) []goja.Value {
	s, ok := thisString(fc)
	if !ok {
		return nil
	}
	total := float64(s.Length())
	args := make([]goja.Value, len(fc.Arguments))
	for i, a := range fc.Arguments {
		as := toStr(a)
		args[i] = as
		total += float64(as.Length())
	}
	g.checkChars("String.prototype.concat", total)
	return args
}

// raw is String.raw with the result size bounded as it is built.
func (g *guard) raw(fc goja.FunctionCall) goja.Value {
	rawObj := fc.Argument(0).ToObject(g.rt).Get("raw").ToObject(g.rt)
	n := toLength(rawObj.Get("length"))
	g.checkElems("String.raw", n)
	var b goja.StringBuilder
	var size float64
	for i := 0; i < int(n); i++ {
		seg := toStr(rawObj.Get(strconv.Itoa(i)))
		size += float64(seg.Length())
		g.checkChars("String.raw", size)
		b.WriteString(seg)
		if i+1 < int(n) && i+1 < len(fc.Arguments) {
			sub := toStr(fc.Arguments[i+1])
			size += float64(sub.Length())
			g.checkChars("String.raw", size)
			b.WriteString(sub)
		}
	}
	return b.String()
}

// join implements Array.prototype.join (and toLocaleString) with the
// result size bounded as it is built, cycles rendered empty as engines
// do, and nesting bounded.
func (g *guard) join(fc goja.FunctionCall, locale bool) goja.Value {
	if fc.This == nil || goja.IsUndefined(fc.This) || goja.IsNull(fc.This) {
		panic(g.rt.NewTypeError("Array.prototype.join called on null or undefined"))
	}
	o := fc.This.ToObject(g.rt)
	if slices.Contains(g.joining, o) {
		return g.rt.ToValue("")
	}
	if len(g.joining) >= maxNesting {
		g.throwRange("Array.prototype.join: nesting deeper than " + strconv.Itoa(maxNesting))
	}
	g.joining = append(g.joining, o)
	defer func() { g.joining = g.joining[:len(g.joining)-1] }()

	n := toLength(o.Get("length"))
	g.checkElems("Array.prototype.join", n)
	var sep goja.String
	switch {
	case locale:
		sep = toStr(g.rt.ToValue(","))
	case isUndef(fc.Argument(0)):
		sep = toStr(g.rt.ToValue(","))
	default:
		sep = toStr(fc.Argument(0))
	}
	var b goja.StringBuilder
	var size float64
	for i := 0; i < int(n); i++ {
		if i > 0 {
			size += float64(sep.Length())
			g.checkChars("Array.prototype.join", size)
			b.WriteString(sep)
		}
		e := o.Get(strconv.Itoa(i))
		if isUndef(e) || goja.IsNull(e) {
			continue
		}
		var s goja.String
		if locale {
			f, ok := goja.AssertFunction(e.ToObject(g.rt).Get("toLocaleString"))
			if !ok {
				panic(g.rt.NewTypeError("toLocaleString is not a function"))
			}
			v, err := f(e)
			if err != nil {
				panic(err)
			}
			s = toStr(v)
		} else {
			s = toStr(e)
		}
		size += float64(s.Length())
		g.checkChars("Array.prototype.join", size)
		b.WriteString(s)
	}
	return b.String()
}

// thisLength refuses array methods on receivers longer than the element
// cap: on a huge sparse array they would loop (or allocate) natively for
// as long as the length says.
func (g *guard) thisLength(what string) precheck {
	return func(fc goja.FunctionCall) []goja.Value {
		if o, ok := objectArg(fc.This); ok {
			g.checkElems(what, toLength(o.Get("length")))
		} else if s, ok := thisString(fc); ok {
			g.checkElems(what, float64(s.Length()))
		}
		return nil
	}
}

func (g *guard) concatArrays(fc goja.FunctionCall) []goja.Value {
	total := 0.0
	count := func(v goja.Value) {
		if o, ok := objectArg(v); ok && spreadable(o) {
			total += toLength(o.Get("length"))
		} else {
			total++
		}
	}
	count(fc.This)
	for _, a := range fc.Arguments {
		count(a)
	}
	g.checkElems("Array.prototype.concat", total)
	return nil
}

// spreadable approximates IsConcatSpreadable.
func spreadable(o *goja.Object) bool {
	if v := o.GetSymbol(goja.SymIsConcatSpreadable); v != nil && !goja.IsUndefined(v) {
		return v.ToBoolean()
	}
	return o.ClassName() == "Array"
}

// flat counts what the flattened array would hold before building it;
// counting stops at the cap, so aliasing tricks cannot make it slow.
func (g *guard) flat(fc goja.FunctionCall) []goja.Value {
	o, ok := objectArg(fc.This)
	if !ok {
		return nil
	}
	depth := 1.0
	if d := fc.Argument(0); !isUndef(d) {
		depth = d.ToFloat()
		if math.IsNaN(depth) {
			depth = 0
		}
	}
	var total float64
	var walk func(a *goja.Object, d float64, level int)
	walk = func(a *goja.Object, d float64, level int) {
		if level > maxNesting {
			g.throwRange("Array.prototype.flat: nesting deeper than " + strconv.Itoa(maxNesting))
		}
		n := toLength(a.Get("length"))
		g.checkElems("Array.prototype.flat", total+n)
		for i := 0; i < int(n); i++ {
			e := a.Get(strconv.Itoa(i))
			if eo, ok := objectArg(e); ok && d >= 1 && eo.ClassName() == "Array" {
				walk(eo, d-1, level+1)
				continue
			}
			total++
			g.checkElems("Array.prototype.flat", total)
		}
	}
	walk(o, depth, 0)
	return nil
}

func (g *guard) arrayFrom(fc goja.FunctionCall) []goja.Value {
	switch items := fc.Argument(0).(type) {
	case *goja.Object:
		g.checkElems("Array.from", toLength(items.Get("length")))
	case goja.String:
		g.checkElems("Array.from", float64(items.Length()))
	}
	return nil
}

// argList bounds the array-like that becomes an argument list.
func (g *guard) argList(what string, idx int) precheck {
	return func(fc goja.FunctionCall) []goja.Value {
		if o, ok := objectArg(fc.Argument(idx)); ok {
			g.checkElems(what, toLength(o.Get("length")))
		}
		return nil
	}
}

// stringKeys bounds Object.* helpers that enumerate a string's indices.
func (g *guard) stringKeys(what string) precheck {
	return func(fc goja.FunctionCall) []goja.Value {
		for _, a := range fc.Arguments {
			if s, ok := a.(goja.String); ok {
				g.checkElems(what, float64(s.Length()))
			}
		}
		return nil
	}
}

// parse refuses JSON text nested deeper than maxNesting: the parser
// recurses in Go.
func (g *guard) parse(fc goja.FunctionCall) []goja.Value {
	s := toStr(fc.Argument(0))
	if s.Length() > maxNesting && jsonDepth(s.String()) > maxNesting {
		g.throwRange("JSON.parse: nesting deeper than " + strconv.Itoa(maxNesting))
	}
	return []goja.Value{s, fc.Argument(1)}
}

// jsonDepth returns the deepest bracket nesting of JSON text, ignoring
// brackets inside strings.
func jsonDepth(s string) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
	}
	return deepest
}

// iteratorProtos evaluates to the prototypes of the built-in iterators.
// Their next methods are what spread, destructuring, Array.from and the
// collection constructors call in a native loop that never returns to
// the interpreter (so never sees an interrupt): [...Array(1e9)] would
// allocate for minutes.
var iteratorProtos = goja.MustCompile("caddyhook:iterators", `[
  Object.getPrototypeOf([][Symbol.iterator]()),
  Object.getPrototypeOf(""[Symbol.iterator]()),
  Object.getPrototypeOf(new Map()[Symbol.iterator]()),
  Object.getPrototypeOf(new Set()[Symbol.iterator]()),
  Object.getPrototypeOf(/x/[Symbol.matchAll]("")),
]`, true)

// stoppableIterators makes every built-in iterator step throw once the
// call has been stopped (time, memory or cancellation), so that a native
// loop driving it ends at the next element; the pending interrupt then
// ends the call even if the script catches the exception.
// It returns the prototypes, the array iterator's first.
func (g *guard) stoppableIterators() []*goja.Object {
	v, err := g.rt.RunProgram(iteratorProtos)
	if err != nil {
		panic(fmt.Errorf("transform sandbox: reaching the iterator prototypes: %w", err))
	}
	arr := v.ToObject(g.rt)
	protos := make([]*goja.Object, int(toLength(arr.Get("length"))))
	for i := range protos {
		protos[i] = arr.Get(strconv.Itoa(i)).ToObject(g.rt)
		g.wrap(protos[i], "next", g.notStopped)
	}
	return protos
}

// notStopped is the precheck form of checkStopped.
func (g *guard) notStopped(goja.FunctionCall) []goja.Value {
	g.checkStopped()
	return nil
}

// checkStopped throws into a call that has been stopped.
func (g *guard) checkStopped() {
	if g.call != nil && g.call.reason.Load() != reasonNone {
		g.throwRange("the call was stopped")
	}
}
