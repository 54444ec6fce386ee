package tmpl

import (
	"errors"
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// DefaultCostLimit is the per-evaluation cost limit NewEnv applies when
// given 0. CEL cost units track operations (a comparison or a
// comprehension step is about 1, a string scan one per 10 bytes). Typical
// match expressions cost under 100; the worst case, nested comprehensions
// over a large payload list, runs at roughly a microsecond per unit, so
// this bounds one evaluation to about a tenth of a second of CPU.
const DefaultCostLimit uint64 = 100_000

// Env is a compiled CEL environment shared by all expressions of a config;
// build it once at provision. It is safe for concurrent use.
type Env struct {
	env       *cel.Env
	costLimit uint64
}

// NewEnv builds the environment with the variables payload, headers, query,
// path and now. costLimit bounds every single evaluation; 0 means
// DefaultCostLimit.
func NewEnv(costLimit uint64) (*Env, error) {
	if costLimit == 0 {
		costLimit = DefaultCostLimit
	}
	env, err := cel.NewEnv(
		cel.Variable(varPayload, cel.DynType),
		cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varQuery, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varPath, cel.StringType),
		cel.Variable(varNow, cel.TimestampType),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	)
	if err != nil {
		return nil, fmt.Errorf("building CEL environment: %w", err)
	}
	return &Env{env: env, costLimit: costLimit}, nil
}

// CostLimit reports the per-evaluation cost limit in force.
func (e *Env) CostLimit() uint64 { return e.costLimit }

// program parses, type-checks and plans src. A compile error is an *Error
// positioned within src.
func (e *Env) program(src string) (cel.Program, *cel.Type, error) {
	ast, iss := e.env.Compile(src)
	if iss.Err() != nil {
		return nil, nil, issueError(iss)
	}
	prg, err := e.env.Program(ast,
		cel.CostLimit(e.costLimit),
		cel.CostTracking(sizeCost{}),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		// Planning fails for instance on an invalid constant regex; it
		// has no source position.
		return nil, nil, &Error{Line: 1, Column: 1, Msg: "cel: " + err.Error()}
	}
	return prg, ast.OutputType(), nil
}

// sizeCost charges size() of a string for the characters it counts, which
// CEL's default cost model treats as constant: 1 plus one per 10 bytes. It
// matches by function name because a call on a dyn value (payload.s.size())
// is dispatched at runtime and carries no overload id.
type sizeCost struct{}

// CallCost implements interpreter.ActualCostEstimator; nil leaves every
// other call to CEL's own model.
func (sizeCost) CallCost(function, _ string, args []ref.Val, _ ref.Val) *uint64 {
	if function != overloads.Size || len(args) != 1 {
		return nil
	}
	s, ok := args[0].(types.String)
	if !ok {
		return nil
	}
	c := 1 + uint64(len(s))/10
	return &c
}

// issueError turns the first CEL issue into an *Error with a 1-based column.
func issueError(iss *cel.Issues) *Error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return &Error{Line: 1, Column: 1, Msg: "cel: " + iss.Err().Error()}
	}
	first := errs[0]
	msg := "cel: " + first.Message
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	line, col := first.Location.Line(), first.Location.Column()+1
	if line < 1 {
		line, col = 1, 1
	}
	col = max(col, 1) // an error at the end of empty input has column -1

	return &Error{Line: line, Column: col, Msg: msg}
}

// eval runs prg over v, classifying any failure without exposing it.
func eval(prg cel.Program, v *Vars) (ref.Val, error) {
	out, _, err := prg.Eval((*activation)(v))
	if err == nil {
		return out, nil
	}
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return nil, &EvalError{Kind: ErrCostLimit}
	}
	return nil, &EvalError{Kind: ErrEval}
}

// Expr is a compiled boolean CEL expression (a mapping's match_expr). It is
// safe for concurrent use.
type Expr struct {
	prg cel.Program
	src string
}

// CompileBool compiles src, which must type-check to bool; an expression of
// type dyn is accepted and must yield a bool at runtime. The error is an
// *Error positioned within src.
func (e *Env) CompileBool(src string) (*Expr, error) {
	prg, typ, err := e.program(src)
	if err != nil {
		return nil, err
	}
	if !typ.IsExactType(cel.BoolType) && !typ.IsExactType(cel.DynType) {
		return nil, &Error{Line: 1, Column: 1,
			Msg: fmt.Sprintf("cel: expression has type %s, want bool", typ)}
	}
	return &Expr{prg: prg, src: src}, nil
}

// Match evaluates the expression for one request. Failures, a cost overrun
// and a non-bool result are *EvalError.
func (x *Expr) Match(v *Vars) (bool, error) {
	out, err := eval(x.prg, v)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, &EvalError{Kind: ErrResultType, Type: out.Type().TypeName()}
	}
	return bool(b), nil
}

// Source returns the expression as compiled.
func (x *Expr) Source() string { return x.src }
