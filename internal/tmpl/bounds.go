package tmpl

import (
	"errors"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// The bounds of one CEL evaluation (a match, or one placeholder of one
// render), all derived from the environment's cost limit so that one
// setting scales them together:
//
//   - cost: CEL's runtime cost, with every call on strings, bytes and
//     lists charged for what it reads and what it builds (sizeCost), also
//     when the call is dispatched at run time on a dyn payload value, which
//     CEL's own model charges 1 whatever the sizes;
//   - output: a call that would build a string longer than the output
//     bound (replace, join, format, whose result can be many times the size
//     of their arguments) is refused before it runs, and a rendered value
//     longer than the bound stops rendering;
//   - time: the evaluation runs under a context that ends once it used its
//     time bound of CPU time (or ten times it of wall-clock time:
//     evalContext), checked between comprehension iterations.
const (
	// bytesPerUnit is the bytes of output one cost unit buys (CEL's
	// string traversal factor, 0.1 per byte).
	bytesPerUnit = 10
	// minOutput is the output bound for small cost limits.
	minOutput = 64 << 10
	// timePerDefaultLimit is the time bound at DefaultCostLimit, of
	// CPU time; it scales with the limit. A full-cost evaluation takes
	// about a tenth of it on an idle core: the bound is a backstop for
	// work the cost model underestimates, not a scheduling deadline.
	timePerDefaultLimit = time.Second
	// interruptEvery is how many comprehension iterations pass between
	// two looks at the deadline.
	interruptEvery = 64
)

// errOutputLimit is returned by a call refused before it runs.
var errOutputLimit = errors.New("output limit")

// boundsFor returns the output and time bounds of a cost limit.
func boundsFor(costLimit uint64) (maxOutput int, timeout time.Duration) {
	maxOutput = int(min(costLimit, 1<<40) * bytesPerUnit)
	maxOutput = max(maxOutput, minOutput)
	timeout = time.Duration(float64(timePerDefaultLimit) * max(1, float64(costLimit)/float64(DefaultCostLimit)))
	return maxOutput, timeout
}

// boundedStrings redefines the extension functions whose result can be
// many times the size of their arguments, with the same overload ids and
// signatures, so that a call whose result would exceed maxOutput fails
// with errOutputLimit instead of allocating it. format delegates to the
// extension's own implementation once its estimate passes.
func boundedStrings(maxOutput int) ([]cel.EnvOption, error) {
	format, err := plainFormat()
	if err != nil {
		return nil, err
	}
	str, list := cel.StringType, cel.ListType(cel.StringType)
	return []cel.EnvOption{
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{str, str, str}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					return boundedReplace(maxOutput, args[0], args[1], args[2], -1)
				})),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{str, str, str, cel.IntType}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					n, _ := args[3].(types.Int)
					return boundedReplace(maxOutput, args[0], args[1], args[2], int64(n))
				}))),
		cel.Function("join",
			cel.MemberOverload("list_join", []*cel.Type{list}, str,
				cel.UnaryBinding(func(l ref.Val) ref.Val { return boundedJoin(maxOutput, l, "") })),
			cel.MemberOverload("list_join_string", []*cel.Type{list, str}, str,
				cel.BinaryBinding(func(l, sep ref.Val) ref.Val {
					s, _ := sep.(types.String)
					return boundedJoin(maxOutput, l, string(s))
				}))),
		cel.Function("format",
			cel.MemberOverload("string_format", []*cel.Type{str, cel.ListType(cel.DynType)}, str,
				cel.BinaryBinding(func(f, args ref.Val) ref.Val {
					s, _ := f.(types.String)
					if formatEstimate(string(s), args, maxOutput) > maxOutput {
						return types.WrapErr(errOutputLimit)
					}
					out, _, err := format.Eval(map[string]any{"f": f, "args": args})
					if err != nil {
						return types.WrapErr(err)
					}
					return out
				}))),
	}, nil
}

// plainFormat is the strings extension's own format, planned once per
// process (a planned program is immutable and safe for concurrent use).
var plainFormat = sync.OnceValues(planPlainFormat)

// planPlainFormat plans f.format(args) with the strings extension alone.
func planPlainFormat() (cel.Program, error) {
	env, err := cel.NewEnv(cel.Variable("f", cel.StringType), cel.Variable("args", cel.ListType(cel.DynType)), ext.Strings())
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile("f.format(args)")
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(ast)
}

// boundedReplace is the extension's replace (strings.Replace) after a size
// check of its result.
func boundedReplace(maxOutput int, s, old, repl ref.Val, n int64) ref.Val {
	str, _ := s.(types.String)
	o, _ := old.(types.String)
	r, _ := repl.(types.String)
	count := int64(strings.Count(string(str), string(o)))
	if n >= 0 {
		count = min(count, n)
	}
	if grow := int64(len(r)) - int64(len(o)); grow > 0 && int64(len(str))+count*grow > int64(maxOutput) {
		return types.WrapErr(errOutputLimit)
	}
	return types.String(strings.Replace(string(str), string(o), string(r), int(n)))
}

// boundedJoin is the extension's join after a size check of its result;
// it fails like the extension on an element that is not a string.
func boundedJoin(maxOutput int, l ref.Val, sep string) ref.Val {
	lister, ok := l.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(l)
	}
	n, _ := lister.Size().(types.Int)
	// every element counts at least one, so that a list of millions of
	// empty strings (a lazy concatenation) is refused, not walked
	total := int64(n-1)*int64(len(sep)) + int64(n)
	for i := types.Int(0); i < n && total <= int64(maxOutput); i++ {
		s, ok := lister.Get(i).(types.String)
		if !ok {
			return types.NewErr("join: invalid input: element %d is not a string", int64(i))
		}
		total += int64(len(s))
	}
	if total > int64(maxOutput) {
		return types.WrapErr(errOutputLimit)
	}
	var b strings.Builder
	b.Grow(int(max(total, 0)))
	for i := range n {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(string(lister.Get(i).(types.String)))
	}
	return types.String(b.String())
}

// formatEstimate bounds the length of f.format(args) from above: the
// format string, every argument rendered at most twice its size (hex
// doubles bytes; lists and maps add separators), and the widest
// precision (100, the extension's default cap) per directive. It stops
// counting past limit.
func formatEstimate(f string, args ref.Val, limit int) int {
	total := len(f) + strings.Count(f, "%")*128
	var walk func(v ref.Val)
	walk = func(v ref.Val) {
		if total > limit {
			return
		}
		switch x := v.(type) {
		case types.String:
			total += 2*len(x) + 2
		case types.Bytes:
			total += 2*len(x) + 2
		case traits.Lister:
			n, _ := x.Size().(types.Int)
			for i := types.Int(0); i < n && total <= limit; i++ {
				total += 2
				walk(x.Get(i))
			}
		case traits.Mapper:
			for it := x.Iterator(); it.HasNext() == types.True && total <= limit; {
				k := it.Next()
				total += 4
				walk(k)
				walk(x.Get(k))
			}
		default:
			total += 32
		}
	}
	walk(args)
	return total
}

// sizeCost charges calls by the sizes they read and build (see the top of
// this file). It matches by function name because a call on a dyn value
// (payload.s.size()) is dispatched at run time and carries no overload id.
type sizeCost struct{}

// CallCost implements interpreter.ActualCostEstimator; nil leaves a call
// to CEL's own model.
func (sizeCost) CallCost(function, _ string, args []ref.Val, result ref.Val) *uint64 {
	var c uint64
	switch function {
	case "size":
		if len(args) != 1 {
			return nil
		}
		s, ok := args[0].(types.String)
		if !ok {
			return nil // lists and maps know their size
		}
		c = 1 + uint64(len(s))/bytesPerUnit
	case "matches":
		// CEL's model for RE2: string length times pattern length.
		if len(args) != 2 {
			return nil
		}
		c = (1 + textSize(args[0])/bytesPerUnit) * (1 + textSize(args[1])/4)
	case "contains", "startsWith", "endsWith", "indexOf", "lastIndexOf", "charAt", "substring", "lowerAscii",
		"upperAscii", "trim", "reverse", "replace", "split", "strings.quote", "quote", "format", "join",
		"_+_", "string", "bytes", "timestamp", "duration", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_":
		read, text := uint64(0), isText(result)
		for _, a := range args {
			read += textSize(a)
			text = text || isText(a)
		}
		if function == "join" && len(args) > 0 {
			read += listTextSize(args[0])
			text = true
		}
		if !text {
			return nil // lists, maps, numbers: CEL's own model
		}
		c = 1 + (read+textSize(result))/bytesPerUnit
	case "@in":
		if len(args) != 2 {
			return nil
		}
		if l, ok := args[1].(traits.Lister); ok {
			n, _ := l.Size().(types.Int)
			c = 1 + uint64(max(n, 0))
		} else {
			return nil
		}
	default:
		return nil
	}
	return &c
}

// isText reports a string or bytes value.
func isText(v ref.Val) bool {
	switch v.(type) {
	case types.String, types.Bytes:
		return true
	}
	return false
}

// textSize is the length of a string or bytes value, else 0.
func textSize(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return uint64(len(x))
	case types.Bytes:
		return uint64(len(x))
	}
	return 0
}

// listTextSize is the total length of a list's string elements plus one
// per element.
func listTextSize(v ref.Val) uint64 {
	l, ok := v.(traits.Lister)
	if !ok {
		return 0
	}
	n, _ := l.Size().(types.Int)
	var total uint64
	for i := range n {
		total += 1 + textSize(l.Get(i))
	}
	return total
}

// errWorkLimit is returned by a call refused before it runs because its
// cost alone would pass the limit.
var errWorkLimit = errors.New("cost limit")

// boundedMatches replaces each call of matches whose pattern is not a
// constant with one that checks the call's cost (CEL's model for RE2:
// string length times pattern length) before compiling the pattern: a
// pattern taken from the payload can make one match run for seconds and
// allocate gigabytes, and CEL charges a call only after it returns.
// Constant patterns are compiled once at provision and left as they are.
func boundedMatches(costLimit uint64) interpreter.InterpretableDecoratorV2 {
	return func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok || call.Function() != overloads.Matches || len(call.Args()) != 2 {
			return i, nil
		}
		if _, constant := call.Args()[1].(interpreter.InterpretableConst); constant {
			return i, nil
		}
		return &boundedMatch{InterpretableCall: call, limit: costLimit}, nil
	}
}

// boundedMatch is a matches call with a cost check before the match.
type boundedMatch struct {
	interpreter.InterpretableCall
	limit uint64
}

// Eval implements interpreter.Interpretable.
func (m *boundedMatch) Eval(a interpreter.Activation) ref.Val {
	args := m.Args()
	return m.match(args[0].Eval(a), args[1].Eval(a))
}

// Exec implements interpreter.InterpretableV2.
func (m *boundedMatch) Exec(f *interpreter.ExecutionFrame) ref.Val {
	args := m.Args()
	return m.match(args[0].Exec(f), args[1].Exec(f))
}

// match checks the cost, then matches as CEL's string does.
func (m *boundedMatch) match(s, pattern ref.Val) ref.Val {
	for _, v := range []ref.Val{s, pattern} {
		if types.IsUnknownOrError(v) {
			return v
		}
	}
	str, ok := s.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(s)
	}
	if (1+textSize(s)/bytesPerUnit)*(1+textSize(pattern)/4) > m.limit {
		return types.WrapErr(errWorkLimit)
	}
	return str.Match(pattern)
}
