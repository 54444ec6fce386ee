package tmpl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// DefaultCostLimit is the per-evaluation cost limit NewEnv applies when
// given 0. CEL cost units track operations (a comparison or a
// comprehension step is about 1) and data: reading or building strings
// costs 1 per 10 bytes (bounds.go). Typical match expressions cost under
// 100. The same limit sets the evaluation's output and time bounds
// (boundsFor): at the default, 1 MB built and 1 s of CPU time.
const DefaultCostLimit uint64 = 100_000

// Env is a compiled CEL environment shared by all expressions of a config;
// build it once at provision. It is safe for concurrent use.
type Env struct {
	env       *cel.Env
	costLimit uint64
	maxOutput int
	timeout   time.Duration
}

// NewEnv builds the environment with the variables payload, headers, query,
// path, now and event. costLimit bounds every single evaluation; 0 means
// DefaultCostLimit.
func NewEnv(costLimit uint64) (*Env, error) {
	if costLimit == 0 {
		costLimit = DefaultCostLimit
	}
	maxOutput, timeout := boundsFor(costLimit)
	bounded, err := boundedStrings(maxOutput)
	if err != nil {
		return nil, fmt.Errorf("building CEL environment: %w", err)
	}
	opts := append([]cel.EnvOption{
		cel.Variable(varPayload, cel.DynType),
		cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varQuery, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(varPath, cel.StringType),
		cel.Variable(varNow, cel.TimestampType),
		cel.Variable(varEvent, cel.StringType),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(),
	}, bounded...)
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("building CEL environment: %w", err)
	}
	return &Env{env: env, costLimit: costLimit, maxOutput: maxOutput, timeout: timeout}, nil
}

// program is a planned CEL expression with its environment's bounds.
type program struct {
	prg       cel.Program
	maxOutput int
	// timeout is the time bound (CPU time, see evalContext); 0 for an
	// expression without a comprehension, the only place an evaluation
	// can be interrupted (everything else it does is bounded by the cost
	// checks made before each call), which then skips the cost of a
	// context.
	timeout time.Duration
}

// program parses, type-checks and plans src. A compile error is an *Error
// positioned within src.
func (e *Env) program(src string) (*program, *cel.Type, error) {
	ast, iss := e.env.Compile(src)
	if iss.Err() != nil {
		return nil, nil, issueError(iss)
	}
	prg, err := e.env.Program(ast,
		cel.CostLimit(e.costLimit),
		cel.CostTracking(sizeCost{}),
		cel.InterruptCheckFrequency(interruptEvery),
		cel.CustomDecoratorV2(boundedMatches(e.costLimit)),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		// Planning fails for instance on an invalid constant regex; it
		// has no source position.
		return nil, nil, &Error{Line: 1, Column: 1, Msg: "cel: " + err.Error()}
	}
	p := &program{prg: prg, maxOutput: e.maxOutput}
	if len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0 {
		p.timeout = e.timeout
	}
	return p, ast.OutputType(), nil
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

// eval runs p over v within its bounds, classifying any failure without
// exposing it.
func (p *program) eval(v *Vars) (ref.Val, error) {
	var out ref.Val
	var err error
	if p.timeout > 0 {
		ctx, done := evalContext(p.timeout)
		out, _, err = p.prg.ContextEval(ctx, (*activation)(v))
		done()
	} else {
		out, _, err = p.prg.Eval((*activation)(v))
	}
	if err == nil {
		return out, nil
	}
	var cancelled interpreter.EvalCancelledError
	switch {
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded, errors.Is(err, errWorkLimit):
		return nil, &EvalError{Kind: ErrCostLimit}
	case errors.Is(err, errOutputLimit):
		return nil, &EvalError{Kind: ErrOutputLimit}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &cancelled):
		return nil, &EvalError{Kind: ErrTimeLimit}
	}
	return nil, &EvalError{Kind: ErrEval}
}

// Expr is a compiled boolean CEL expression (a mapping's match_expr). It is
// safe for concurrent use.
type Expr struct {
	prg *program
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
	out, err := x.prg.eval(v)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, &EvalError{Kind: ErrResultType, Type: out.Type().TypeName()}
	}
	return bool(b), nil
}
