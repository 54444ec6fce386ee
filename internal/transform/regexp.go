package transform

import (
	"fmt"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname, see regexp2Clock

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
)

// Regular expressions with lookaround or backreferences, and every match
// that resumes at a lastIndex, run in goja's backtracking engine
// (regexp2), which loops in Go where the runtime's interrupt cannot reach
// it: /^(?=[a-z])(\w+\s?)*$/ against "aaaa…!" would run for hours. So:
//
//   - regexp2 gives up a match after matchTimeout. Its settings are
//     process-wide; they are set once, before any runtime exists, and only
//     goja uses regexp2 in this program;
//   - goja reads a match the engine gave up as "no match", which would
//     change the script's result silently (a filter would let through
//     exactly the input crafted to be slow). RegExp.prototype.exec and
//     test are therefore wrapped: when regexp2's clock advanced by the
//     timeout or more during the call, a match may have been given up, and
//     the call stops with a timeout instead. The check reads regexp2's own
//     clock rather than the wall clock because that clock lags whenever
//     its goroutine is starved (many busy calls on few cores) and then
//     times a match out early; see regexp2Clock. Every other
//     regular-expression built-in (replace, split, match, matchAll,
//     search) goes through exec in this sandbox: replacing exec switches
//     goja to its generic, spec-shaped paths, which call exec per match.
const (
	matchTimeout  = DefaultTimeout
	matchClock    = 5 * time.Millisecond // regexp2's clock period; its default 100ms would stretch matchTimeout
	maxPattern    = 64 << 10             // characters of a pattern compiled at run time
	maxPatternNew = maxNesting           // group nesting of a pattern compiled at run time
)

// regexp2Clock is regexp2's approximate clock (package variable "fast",
// whose first field is the current time in ticks of 2^20 ns, written and
// read atomically). A match times out when this clock reaches the
// deadline the match computed from it, current + ticks(timeout + period),
// so a match that timed out saw the clock advance by at least that much.
// TestBacktrackingRegexpEveryPath fails if a regexp2 upgrade moves it.
//
//go:linkname regexp2Clock github.com/dlclark/regexp2/v2.fast
var regexp2Clock struct{ current int64 }

// timeoutTicks is the clock advance that may mean a match was given up.
var timeoutTicks = int64(matchTimeout+matchClock) >> 20

// clockStarter is a trivial pattern matched before each timed call: when
// regexp2's clock is not running (it stops a second after the last
// deadline), the next match first moves it forward by the whole idle
// time, which would read as an advance during the call.
var clockStarter *regexp2.Regexp

func init() {
	regexp2.DefaultMatchTimeout = matchTimeout
	regexp2.SetTimeoutCheckPeriod(matchClock)
	clockStarter = regexp2.MustCompile("^", regexp2.ECMAScript)
}

// timeMatch replaces RegExp.prototype[name] (exec or test) by a version
// that stops the call when a match may have been given up (see above).
// Only a failed match can be one (a given-up match reads as null or
// false), and the clock also advances while the process waits for a CPU,
// so a failed match with a suspicious advance is tried once more from the
// same lastIndex before the call is stopped, unless the call is already
// over its budget.
func (g *guard) timeMatch(regExpProto *goja.Object, name string) {
	origVal := regExpProto.Get(name)
	orig, ok := goja.AssertFunction(origVal)
	if !ok {
		return
	}
	// the built-in's own Go function, called directly: it is called per
	// match in every loop over matches
	native, isNative := origVal.Export().(func(goja.FunctionCall) goja.Value)
	timed := func(fc goja.FunctionCall) goja.Value {
		g.checkStopped()
		rx, isRegExp := objectArg(fc.This)
		var lastIndex goja.Value
		if isRegExp {
			lastIndex = rx.Get("lastIndex")
		}
		for attempt := 0; ; attempt++ {
			_, _ = clockStarter.MatchString("")
			before := atomic.LoadInt64(&regexp2Clock.current)
			var v goja.Value
			if isNative {
				v = native(fc)
			} else {
				v = g.invoke(orig, fc.This, fc.Arguments...)
			}
			failed := goja.IsNull(v) || v.SameAs(g.rt.ToValue(false))
			if !failed || atomic.LoadInt64(&regexp2Clock.current)-before < timeoutTicks || g.call == nil {
				return v
			}
			if attempt > 0 || g.call.reason.Load() != reasonNone {
				g.call.detail = fmt.Sprintf("a regular expression match ran longer than %v (the limit of the backtracking engine)", matchTimeout)
				g.call.stop(reasonTimeout)
				panic(g.rt.NewGoError(fmt.Errorf("regular expression match stopped")))
			}
			if isRegExp {
				_ = rx.Set("lastIndex", lastIndex)
			}
		}
	}
	g.define(regExpProto, name, origVal.ToObject(g.rt).Get("length"), timed)
	if name == "exec" {
		g.timedExec = timed
	}
}

// checkPattern is the native behind the sandbox's RegExp constructor and
// RegExp.prototype.compile: it refuses patterns whose compilation would
// take long in Go (the backtracking engine's parser is quadratic in group
// nesting: 100,000 nested lookaheads take most of a minute) and returns
// the pattern and flags converted exactly once, so that a toString or a
// source getter cannot show the check one pattern and the compiler
// another. A RegExp object passes unchanged: its pattern was checked when
// it was made (or is a literal of the module).
func (g *guard) checkPattern(fc goja.FunctionCall) goja.Value {
	pattern, flags := fc.Argument(0), fc.Argument(1)
	if isClass(pattern, "RegExp") {
		return g.rt.NewArray(pattern, flags)
	}
	if o, ok := objectArg(pattern); ok {
		if m := o.GetSymbol(goja.SymMatch); m != nil && !isUndef(m) && m.ToBoolean() {
			// IsRegExp: the constructor would read source and flags.
			if isUndef(flags) {
				flags = toStr(o.Get("flags"))
			}
			pattern = o.Get("source")
		}
	}
	if !isUndef(pattern) {
		pattern = g.refusePattern(toStr(pattern))
	}
	if !isUndef(flags) {
		flags = toStr(flags)
	}
	return g.rt.NewArray(pattern, flags)
}

// refusePattern throws a SyntaxError for a pattern over the size or
// nesting bounds, and returns it otherwise.
func (g *guard) refusePattern(s goja.String) goja.String {
	if s.Length() > maxPattern {
		g.throwSyntax(fmt.Sprintf("Invalid regular expression: pattern longer than %d characters", maxPattern))
	}
	if depth := patternDepth(s.String()); depth > maxPatternNew {
		g.throwSyntax(fmt.Sprintf("Invalid regular expression: groups nested deeper than %d", maxPatternNew))
	}
	return s
}

// throwSyntax throws a SyntaxError into the script.
func (g *guard) throwSyntax(msg string) {
	obj, err := g.rt.New(g.syntaxError, g.rt.ToValue(msg))
	if err != nil {
		panic(err)
	}
	panic(obj)
}

// patternDepth returns the deepest group nesting of a regular expression
// source, skipping escaped characters and character classes.
func patternDepth(s string) int {
	depth, deepest := 0, 0
	inClass := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			depth++
			deepest = max(deepest, depth)
		case c == ')' && depth > 0:
			depth--
		}
	}
	return deepest
}
