package tmpl

import (
	"errors"
	"fmt"
)

// Error is a compile error in a template or CEL expression, positioned in
// the source the caller passed in.
type Error struct {
	// Line is the 1-based line of the fault.
	Line int
	// Column is the 1-based column of the fault, counted in characters.
	Column int
	// Msg describes the fault.
	Msg string
}

// Error implements error as "line:column: message".
func (e *Error) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// Kinds of evaluation failure, matched with errors.Is on an [*EvalError].
var (
	// ErrCostLimit reports that an evaluation exceeded the cost limit.
	ErrCostLimit = errors.New("cel: runtime cost limit exceeded")
	// ErrEval reports that an expression failed at runtime (missing key,
	// no matching overload, division by zero, ...).
	ErrEval = errors.New("cel: evaluation failed")
	// ErrResultType reports a result that cannot be used: not a bool for a
	// match expression, or a value with no rendering for a placeholder.
	ErrResultType = errors.New("cel: unusable result type")
	// ErrOutputLimit reports a call or a rendering that would exceed the
	// evaluation's output bound.
	ErrOutputLimit = errors.New("cel: output size limit exceeded")
	// ErrTimeLimit reports an evaluation that ran past its wall-time bound.
	ErrTimeLimit = errors.New("cel: evaluation time limit exceeded")
)

// EvalError is a failed CEL evaluation. Its message deliberately carries no
// payload content and no expression text.
type EvalError struct {
	// Kind is ErrCostLimit, ErrOutputLimit, ErrTimeLimit, ErrEval or
	// ErrResultType.
	Kind error
	// Line and Column locate the placeholder in its template (1-based);
	// both are 0 for a match expression.
	Line, Column int
	// Type names the offending CEL type for ErrResultType, else "".
	Type string
}

// Error implements error.
func (e *EvalError) Error() string {
	msg := e.Kind.Error()
	if e.Type != "" {
		msg += " " + e.Type
	}
	if e.Line > 0 {
		return fmt.Sprintf("placeholder at %d:%d: %s", e.Line, e.Column, msg)
	}
	return msg
}

// Unwrap returns Kind, so errors.Is(err, ErrCostLimit) works.
func (e *EvalError) Unwrap() error { return e.Kind }
