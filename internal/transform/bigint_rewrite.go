package transform

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/token"
	"github.com/dop251/goja/unistring"
)

// bigintOps is the parameter of the bundle's wrapper function that holds
// the checked BigInt operations (bigint.go); the rewritten operators call
// its methods. A module may not use the name itself.
const bigintOps = "__caddyhook_bigint"

// bigintArithmetic maps the operators that can build a BigInt much longer
// than their operands to the checked operation each becomes, as binary
// operators and as compound assignments (x *= y is parsed as an
// assignment whose operator is *).
var bigintArithmetic = map[token.Token]string{
	token.MULTIPLY: "mul", token.EXPONENT: "pow", token.SHIFT_LEFT: "shl", token.SHIFT_RIGHT: "shr",
}

// bigintComparisons maps the comparisons, which read a string compared
// with a BigInt, to their checked operations.
var bigintComparisons = map[token.Token]string{
	token.LESS: "lt", token.GREATER: "gt", token.LESS_OR_EQUAL: "le", token.GREATER_OR_EQUAL: "ge",
	token.EQUAL: "eq", token.NOT_EQUAL: "ne",
}

// astPkg is the import path of goja's syntax tree, the only types the
// rewrite walks into.
var astPkg = reflect.TypeFor[ast.Program]().PkgPath()

// usesBigInt reports whether a module can make a BigInt: it writes a
// BigInt literal or names BigInt (code is the bundle, the name may be
// anywhere in it). A module that does not runs without the BigInt
// function, so it has no way to make one.
func usesBigInt(code string, prog *ast.Program) bool {
	if strings.Contains(code, "BigInt") {
		return true
	}
	found := false
	walkAST(reflect.ValueOf(prog), map[uintptr]bool{}, func(v reflect.Value) {
		if lit, ok := reflect.TypeAssert[*ast.NumberLiteral](v); ok {
			if _, isBig := lit.Value.(*big.Int); isBig {
				found = true
			}
		}
	})
	return found
}

// walkAST calls visit on every interface value holding a node of goja's
// syntax tree, after walking the node's children (so visit may replace
// the node in its parent through v).
func walkAST(v reflect.Value, seen map[uintptr]bool, visit func(v reflect.Value)) {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		walkAST(v.Elem(), seen, visit)
		if _, ok := reflect.TypeAssert[ast.Node](v); ok {
			visit(v)
		}
	case reflect.Pointer:
		if v.IsNil() || v.Type().Elem().PkgPath() != astPkg || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		walkAST(v.Elem(), seen, visit)
	case reflect.Struct:
		if v.Type().PkgPath() != astPkg {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkAST(v.Field(i), seen, visit)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkAST(v.Index(i), seen, visit)
		}
	}
}

// rewriteBigInt compiles the operators of bigintArithmetic and
// bigintComparisons in prog as calls to the checked operations: a op b becomes
// __caddyhook_bigint.op(a, b), keeping the operands' order of evaluation
// and the operator's position (so error locations and the source map stay
// right). A compound assignment t op= r becomes t = ops.op(t, r) when t
// can be evaluated twice without effect (a variable, or a property of a
// variable, this or super by a literal key), else ops.set(o, k, "op", r),
// which reads o[k] once, after r (the one order that differs from the
// operator's). A compound assignment to a private field of any other
// object is refused with its position. file maps positions for messages.
func rewriteBigInt(prog *ast.Program, f *file.File) error {
	if strings.Count(f.Source(), bigintOps) > 1 { // the wrapper's parameter is the one
		return fmt.Errorf("the name %s is reserved", bigintOps)
	}
	var err error
	done := map[ast.Expression]ast.Expression{} // nodes the parser shares appear once rewritten
	walkAST(reflect.ValueOf(prog), map[uintptr]bool{}, func(v reflect.Value) {
		x, ok := reflect.TypeAssert[ast.Expression](v)
		if !ok || err != nil {
			return
		}
		r, seen := done[x]
		if !seen {
			r, err = bigintReplacement(x, f)
			done[x] = r
		}
		if r == nil || err != nil {
			return
		}
		rv := reflect.ValueOf(r)
		if !v.CanSet() || !rv.Type().AssignableTo(v.Type()) {
			err = fmt.Errorf("%s: this operator cannot be checked here", position(f, x.Idx0()))
			return
		}
		v.Set(rv)
	})
	return err
}

// bigintReplacement returns what replaces x, or nil to keep it: an
// operator none of whose operands can be a BigInt stays goja's own.
func bigintReplacement(x ast.Expression, f *file.File) (ast.Expression, error) {
	switch n := x.(type) {
	case *ast.BinaryExpression:
		a, b := staticType(n.Left), staticType(n.Right)
		if name, ok := bigintArithmetic[n.Operator]; ok && a == anyType && b == anyType {
			return opCall(name, n.Idx0(), n.Idx1(), n.Left, n.Right), nil
		}
		// a string is read as a BigInt only when compared with one
		if name, ok := bigintComparisons[n.Operator]; ok && a != numberType && b != numberType && (a != stringType || b != stringType) {
			return opCall(name, n.Idx0(), n.Idx1(), n.Left, n.Right), nil
		}
	case *ast.AssignExpression:
		if name, ok := bigintArithmetic[n.Operator]; ok && staticType(n.Right) == anyType {
			return compoundCall(n, name, f)
		}
	}
	return nil, nil
}

// What the syntax of an operand tells of its value, once converted to a
// primitive as the operators do.
const (
	anyType    = iota // anything, a BigInt included
	numberType        // a primitive that is neither a BigInt nor a string
	stringType        // a string
)

// staticType classifies an operand by its syntax alone: a literal, or a
// unary operator whose result cannot be a BigInt (+x throws for one).
// Arithmetic with an operand that is not anyType cannot make a BigInt:
// BigInt mixed with anything else throws.
func staticType(e ast.Expression) int {
	switch u := e.(type) {
	case *ast.NumberLiteral:
		if _, isBig := u.Value.(*big.Int); !isBig {
			return numberType
		}
	case *ast.BooleanLiteral, *ast.NullLiteral:
		return numberType
	case *ast.StringLiteral:
		return stringType
	case *ast.TemplateLiteral:
		if u.Tag == nil { // a tag may return anything
			return stringType
		}
	case *ast.UnaryExpression:
		switch u.Operator {
		case token.PLUS, token.NOT, token.VOID, token.DELETE:
			return numberType
		case token.TYPEOF:
			return stringType
		case token.MINUS, token.BITWISE_NOT:
			if staticType(u.Operand) != anyType {
				return numberType
			}
		}
	}
	return anyType
}

// opCall is __caddyhook_bigint.name(args...) at the position of the
// expression it replaces.
func opCall(name string, idx0, idx1 file.Idx, args ...ast.Expression) *ast.CallExpression {
	return &ast.CallExpression{
		Callee: &ast.DotExpression{
			Left:       &ast.Identifier{Name: bigintOps, Idx: idx0},
			Identifier: ast.Identifier{Name: unistring.String(name), Idx: idx0},
		},
		LeftParenthesis:  idx0,
		ArgumentList:     args,
		RightParenthesis: idx1 - 1,
	}
}

// compoundCall rewrites t op= r (see rewriteBigInt).
func compoundCall(n *ast.AssignExpression, name string, f *file.File) (ast.Expression, error) {
	idx0, idx1 := n.Idx0(), n.Idx1()
	assign := func(target, read ast.Expression) ast.Expression {
		return &ast.AssignExpression{Operator: token.ASSIGN, Left: target, Right: opCall(name, idx0, idx1, read, n.Right)}
	}
	str := func(s unistring.String, at file.Idx) ast.Expression {
		return &ast.StringLiteral{Idx: at, Literal: `"` + string(s) + `"`, Value: s}
	}
	switch t := n.Left.(type) {
	case *ast.Identifier:
		return assign(t, &ast.Identifier{Name: t.Name, Idx: t.Idx}), nil
	case *ast.DotExpression:
		if o, ok := reusable(t.Left, false); ok {
			return assign(t, &ast.DotExpression{Left: o, Identifier: t.Identifier}), nil
		}
		return opCall("set", idx0, idx1, t.Left, str(t.Identifier.Name, t.Identifier.Idx), str(unistring.String(name), idx0), n.Right), nil
	case *ast.BracketExpression:
		o, ok := reusable(t.Left, false)
		k, literal := reusable(t.Member, true)
		switch {
		case ok && literal:
			return assign(t, &ast.BracketExpression{Left: o, Member: k, LeftBracket: t.LeftBracket, RightBracket: t.RightBracket}), nil
		case !isSuper(t.Left):
			return opCall("set", idx0, idx1, t.Left, t.Member, str(unistring.String(name), idx0), n.Right), nil
		}
	case *ast.PrivateDotExpression:
		if o, ok := reusable(t.Left, false); ok {
			return assign(t, &ast.PrivateDotExpression{Left: o, Identifier: t.Identifier}), nil
		}
	}
	return nil, fmt.Errorf("%s: in a transform that uses BigInt, this compound assignment (%s=) cannot be checked; "+
		"assign the object (or the key) to a variable first", position(f, idx0), n.Operator)
}

// reusable returns a copy of e when evaluating it twice has no effect:
// a literal, or, as an object (not as a key, whose conversion to a
// property key could run code twice), a variable, this or super.
func reusable(e ast.Expression, key bool) (ast.Expression, bool) {
	switch o := e.(type) {
	case *ast.StringLiteral:
		return clone(o), true
	case *ast.NumberLiteral:
		return clone(o), true
	case *ast.Identifier:
		return clone(o), !key
	case *ast.ThisExpression:
		return clone(o), !key
	case *ast.SuperExpression:
		return clone(o), !key
	}
	return nil, false
}

// clone returns a shallow copy of a node.
func clone[T any](n *T) *T {
	c := *n
	return &c
}

// isSuper reports super, which the set operation cannot receive.
func isSuper(e ast.Expression) bool {
	_, ok := e.(*ast.SuperExpression)
	return ok
}

// position renders idx as file:line:column of the original source.
func position(f *file.File, idx file.Idx) string {
	p := f.Position(int(idx) - f.Base())
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
}
