package transform

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// BigInt arithmetic is where a script's data decides, in one step of the
// runtime, how much memory a result takes: goja computes 1n << n, a ** b,
// a * b and BigInt.asUintN(n, x) with math/big and no bound, so
// `BigInt.asUintN(2**40, -1n)` asked Go for 128 GiB and ended the process
// ("fatal error: runtime: out of memory"), and `1n << BigInt(4e9)` built
// 500 MB in a call capped at 8 MiB. Reading a long decimal string as a
// BigInt (BigInt(s), or s compared with a BigInt) is quadratic in goja:
// a million digits took 1.3 s in one uninterruptible step. The operators
// are instructions of goja's machine, not built-ins a wrapper can reach, so
// the sandbox bounds BigInt in three places:
//
//   - a module that neither writes a BigInt literal nor names BigInt runs in
//     a realm without the BigInt function (vm.load deletes it): it has no
//     way to make a BigInt, as typed arrays and DataView are gone too
//     (sandbox.go), and its operators stay goja's own;
//   - a module that does has the operators that can grow a BigInt faster
//     than by a bit, or read a string as one, compiled as calls to the
//     checked operations of bigintSource (bigint_rewrite.go): *, **, <<
//     and >> (and their compound assignments) refuse a result longer than
//     the cap before computing it, and <, >, <=, >=, == and != read a
//     string compared with a BigInt with the bounded parser below;
//   - BigInt(), BigInt.asIntN and BigInt.asUintN are replaced by checked
//     versions (kept as BigInt.prototype.constructor).
//
// The cap, maxBigIntBits, is 2^18 bits (78,914 decimal digits), or 8 bits
// per byte of the memory budget if that is smaller: within it the slowest
// single step (reading a decimal string of that length, or printing such a
// value in decimal) takes milliseconds. Addition, subtraction and the
// bitwise operators grow a value by at most a bit per step, so values stay
// within twice the cap. A refusal stops the call with KindMemory, as every
// guard does.
//
// The checked operations follow the specification where goja departs from
// it: BigInt() without an argument throws, "-0" reads as 0n, and a string
// with a leading zero is decimal (goja read a long one as octal).

// maxBigIntBitsCeiling is the cap on a BigInt's length in bits.
const maxBigIntBitsCeiling = 1 << 18

// maxBigIntBits is the longest BigInt, in bits, a call may build.
func (o Options) maxBigIntBits() int64 { return min(maxBigIntBitsCeiling, 8*o.MaxBytes) }

// Kinds of checked BigInt operation, as bigintSource passes them.
const (
	bigMul = iota
	bigPow
	bigShl
	bigShr
)

// bigintSource builds the checked operations and installs the checked
// BigInt function. It runs on every new runtime before any module code,
// so it captures the built-ins it uses before a module could change them,
// and returns the operations the bundle's wrapper receives as bigintOps.
// The operators run on primitives: objects are converted first, in the
// operator's order, as ToPrimitive (ECMA-262 7.1.1) does, so a valueOf
// cannot show the check one value and the operator another.
const bigintSource = `(function (natives) {
  "use strict";
  const G = globalThis;
  const { check, parse, compared, asN } = natives;
  const NativeBigInt = G.BigInt, { TypeError, RangeError } = G, { apply } = Reflect;
  const { defineProperty, freeze } = Object, { trunc } = Math, toPrimitiveKey = Symbol.toPrimitive;
  const MUL = 0, POW = 1, SHL = 2, SHR = 3;

  const isObject = (x) => (typeof x === "object" && x !== null) || typeof x === "function";
  const toPrimitive = (x, hint) => {
    const exotic = x[toPrimitiveKey];
    if (exotic !== undefined && exotic !== null) {
      if (typeof exotic !== "function") throw new TypeError("Symbol.toPrimitive is not a function");
      const r = apply(exotic, x, [hint]);
      if (isObject(r)) throw new TypeError("Cannot convert object to primitive value");
      return r;
    }
    let m = x[hint === "string" ? "toString" : "valueOf"];
    if (typeof m === "function") { const r = apply(m, x, []); if (!isObject(r)) return r; }
    m = x[hint === "string" ? "valueOf" : "toString"];
    if (typeof m === "function") { const r = apply(m, x, []); if (!isObject(r)) return r; }
    throw new TypeError("Cannot convert object to primitive value");
  };
  const numeric = (x) => isObject(x) ? toPrimitive(x, "number") : x;

  // a * b, a ** b, a << b, a >> b with the BigInt result bounded
  const arithmetic = (kind, op) => function (a, b) {
    if (typeof a !== "number" || typeof b !== "number") {
      a = numeric(a);
      b = numeric(b);
      if (typeof a === "bigint" && typeof b === "bigint") check(kind, a, b);
    }
    return op(a, b);
  };
  // a string facing a BigInt becomes its value (a BigInt, or an infinity
  // when its magnitude is beyond the other operand's) or undefined when it
  // is not an integer; unequal, unordered
  const NONE = {};
  const facing = (s, n) => { const v = compared(s, n); return v === undefined ? NONE : v; };
  const relational = (op) => function (a, b) {
    if (typeof a !== "number" || typeof b !== "number") {
      a = numeric(a);
      b = numeric(b);
      if (typeof a === "bigint" && typeof b === "string") b = facing(b, a);
      else if (typeof b === "bigint" && typeof a === "string") a = facing(a, b);
      if (a === NONE || b === NONE) return false;
    }
    return op(a, b);
  };
  const looseEquals = (a, b) => {
    const ta = typeof a, tb = typeof b;
    if (ta === tb || a === null || a === undefined || b === null || b === undefined) return a == b;
    const oa = ta === "object" || ta === "function", ob = tb === "object" || tb === "function";
    if (oa && ob) return a == b;
    if (oa) a = toPrimitive(a, "default");
    else if (ob) b = toPrimitive(b, "default");
    if (typeof a === "bigint" && typeof b === "string") b = facing(b, a);
    else if (typeof b === "bigint" && typeof a === "string") a = facing(a, b);
    return a !== NONE && b !== NONE && a == b;
  };
  const ops = {
    mul: arithmetic(MUL, (a, b) => a * b),
    pow: arithmetic(POW, (a, b) => a ** b),
    shl: arithmetic(SHL, (a, b) => a << b),
    shr: arithmetic(SHR, (a, b) => a >> b),
    lt: relational((a, b) => a < b),
    gt: relational((a, b) => a > b),
    le: relational((a, b) => a <= b),
    ge: relational((a, b) => a >= b),
    eq: looseEquals,
    ne: (a, b) => !looseEquals(a, b),
    // o[k] op= r, for a target the rewrite cannot evaluate twice
    set(o, k, op, r) {
      if (isObject(k)) k = toPrimitive(k, "string");
      return (o[k] = ops[op](o[k], r));
    },
  };

  const toIndex = (v) => {
    const n = v === undefined ? 0 : trunc(+v) || 0;
    if (n < 0 || n > 9007199254740991) throw new RangeError("Invalid value: not (convertible to) a safe integer");
    return n;
  };
  const toBigInt = (v) => {
    const p = numeric(v);
    switch (typeof p) {
      case "bigint": return p;
      case "string": return parse(p);
      case "boolean": return p ? 1n : 0n;
    }
    throw new TypeError("Cannot convert " + (p === null ? "null" : typeof p) + " to a BigInt");
  };
  function BigInt(value) {
    if (new.target !== undefined) throw new TypeError("BigInt is not a constructor");
    const p = numeric(value);
    return typeof p === "number" ? NativeBigInt(p) : toBigInt(p);
  }
  const methods = {
    asIntN(bits, bigint) { return asN(true, toIndex(bits), toBigInt(bigint)); },
    asUintN(bits, bigint) { return asN(false, toIndex(bits), toBigInt(bigint)); },
  };
  const method = { writable: true, enumerable: false, configurable: true };
  defineProperty(BigInt, "prototype", { value: NativeBigInt.prototype, writable: false, enumerable: false, configurable: false });
  defineProperty(NativeBigInt.prototype, "constructor", { ...method, value: BigInt });
  defineProperty(BigInt, "asIntN", { ...method, value: methods.asIntN });
  defineProperty(BigInt, "asUintN", { ...method, value: methods.asUintN });
  defineProperty(G, "BigInt", { ...method, value: BigInt });
  return freeze(ops);
})`

// bigintProgram is compiled once and run on every new runtime.
var bigintProgram = goja.MustCompile("caddyhook:bigint", bigintSource, true)

// installBigInt runs bigintSource on g's runtime and keeps the operations.
func (g *guard) installBigInt() error {
	v, err := g.rt.RunProgram(bigintProgram)
	if err != nil {
		return err
	}
	fn, _ := goja.AssertFunction(v)
	natives := g.rt.NewObject()
	asIntN, _ := goja.AssertFunction(g.rt.Get("BigInt").ToObject(g.rt).Get("asIntN"))
	asUintN, _ := goja.AssertFunction(g.rt.Get("BigInt").ToObject(g.rt).Get("asUintN"))
	for name, f := range map[string]func(goja.FunctionCall) goja.Value{
		"check":    g.bigCheck,
		"parse":    g.bigParse,
		"compared": g.bigCompared,
		"asN":      func(fc goja.FunctionCall) goja.Value { return g.bigAsN(fc, asIntN, asUintN) },
	} {
		_ = natives.Set(name, g.native(name, nil, f))
	}
	ops, err := fn(goja.Undefined(), natives)
	if err != nil {
		return err
	}
	g.bigintOps = ops
	return nil
}

// bigOf returns the value of a BigInt (a copy), nil for anything else.
func bigOf(v goja.Value) *big.Int {
	b, _ := v.Export().(*big.Int)
	return b
}

// failBigInt refuses a BigInt result that would exceed the cap. The
// message names the operation and the cap, not the operands (payload
// numbers must not reach messages).
func (g *guard) failBigInt(what string) {
	msg := "memory limit: " + what + " would build a BigInt of more than " + strconv.FormatInt(g.maxBigIntBits, 10) + " bits"
	g.call.detail = msg
	g.call.stop(reasonMemory)
	g.throwRange(msg)
}

// bigCheck is check(kind, a, b): it refuses a * b, a ** b, a << b or
// a >> b on BigInts when the result would be longer than the cap. It runs
// before the operator, which computes the result (and throws the errors
// the specification asks for, such as a negative exponent).
func (g *guard) bigCheck(fc goja.FunctionCall) goja.Value {
	a, b := bigOf(fc.Argument(1)), bigOf(fc.Argument(2))
	if a == nil || b == nil || a.Sign() == 0 {
		return goja.Undefined()
	}
	limit := g.maxBigIntBits
	switch fc.Argument(0).ToInteger() {
	case bigMul:
		if b.Sign() != 0 && int64(a.BitLen())+int64(b.BitLen()) > limit+1 {
			g.failBigInt("BigInt multiplication")
		}
	case bigPow:
		// |a| ≥ 2 has at least BitLen-1 bits to raise: the result has at
		// least (BitLen-1)·b + 1 bits, and at most twice that
		if b.Sign() > 0 && a.CmpAbs(big.NewInt(1)) > 0 {
			if !b.IsInt64() || b.Int64() > limit || (int64(a.BitLen())-1)*b.Int64()+1 > limit {
				g.failBigInt("BigInt exponentiation")
			}
		}
	case bigShl, bigShr:
		n := b
		if fc.Argument(0).ToInteger() == bigShr {
			n = new(big.Int).Neg(b)
		}
		if n.Sign() > 0 && (!n.IsInt64() || int64(a.BitLen())+n.Int64() > limit) {
			g.failBigInt("BigInt shift")
		}
	}
	return goja.Undefined()
}

// bigParse is parse(s): StringToBigInt(s) for BigInt() and the checked
// built-ins, refusing a value longer than the cap and throwing the
// SyntaxError of the specification for a string that is not an integer.
func (g *guard) bigParse(fc goja.FunctionCall) goja.Value {
	v, _, ok := parseBigInt(toStr(fc.Argument(0)).String(), g.maxBigIntBits)
	switch {
	case !ok:
		obj, err := g.rt.New(g.syntaxError, g.rt.ToValue("Cannot convert a string that is not an integer to a BigInt"))
		if err != nil {
			panic(err)
		}
		panic(obj)
	case v == nil:
		g.failBigInt("BigInt from a string")
	}
	return g.rt.ToValue(v)
}

// bigCompared is compared(s, n): the value of s, a string compared with
// the BigInt n. A magnitude beyond n's is read no further: it compares as
// the infinity of its sign would. Undefined when s is not an integer.
func (g *guard) bigCompared(fc goja.FunctionCall) goja.Value {
	n := bigOf(fc.Argument(1))
	limit := int64(2)
	if n != nil {
		limit += int64(n.BitLen())
	}
	v, sign, ok := parseBigInt(toStr(fc.Argument(0)).String(), limit)
	switch {
	case !ok:
		return goja.Undefined()
	case v == nil:
		return g.rt.ToValue(math.Inf(sign))
	}
	return g.rt.ToValue(v)
}

// bigAsN is asN(signed, bits, x), BigInt.asIntN or asUintN once bits is an
// index and x a BigInt: the built-in when 2^bits is within the cap, else
// x itself when it fits in bits, else a refusal.
func (g *guard) bigAsN(fc goja.FunctionCall, asIntN, asUintN goja.Callable) goja.Value {
	signed := fc.Argument(0).ToBoolean()
	bits := fc.Argument(1).ToFloat()
	x := bigOf(fc.Argument(2))
	if x == nil {
		panic(g.rt.NewTypeError("Cannot convert to a BigInt"))
	}
	if bits <= float64(g.maxBigIntBits) {
		f := asUintN
		if signed {
			f = asIntN
		}
		return g.invoke(f, goja.Undefined(), fc.Argument(1), fc.Argument(2))
	}
	// bits exceeds the cap, so exceeds any BitLen a call can reach plus one
	if float64(x.BitLen()) < bits && (signed || x.Sign() >= 0) {
		return fc.Argument(2)
	}
	if signed {
		g.failBigInt("BigInt.asIntN")
	}
	g.failBigInt("BigInt.asUintN")
	return nil
}

// isJSSpace reports the characters StringToBigInt trims: WhiteSpace and
// LineTerminator (ECMA-262 12.2, 12.3). Go's unicode.IsSpace differs
// (it has U+0085 and lacks U+FEFF).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// log2Of10 bounds the bits of a decimal digit.
const log2Of10 = 3.321928094887362

// parseBigInt is StringToBigInt (ECMA-262 7.1.14): after trimming white
// space, an empty string is 0n; otherwise a decimal integer with an
// optional sign, or 0b, 0o or 0x digits without one. ok is false for
// anything else. When the value would have more than maxBits bits, it is
// not built: v is nil and sign its sign (±1). Leading zeros cost nothing,
// so the time is bounded by maxBits whatever the string's length.
func parseBigInt(s string, maxBits int64) (v *big.Int, sign int, ok bool) {
	t := strings.TrimFunc(s, isJSSpace)
	if t == "" {
		return new(big.Int), 1, true
	}
	base, digits, perDigit := 10, t, 0 // bits per digit for a power-of-two base
	sign = 1
	if len(t) > 2 && t[0] == '0' {
		switch t[1] | 0x20 {
		case 'x':
			base, digits, perDigit = 16, t[2:], 4
		case 'o':
			base, digits, perDigit = 8, t[2:], 3
		case 'b':
			base, digits, perDigit = 2, t[2:], 1
		}
	}
	if base == 10 && (t[0] == '+' || t[0] == '-') {
		if t[0] == '-' {
			sign = -1
		}
		digits = t[1:]
	}
	if digits == "" {
		return nil, 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digitValue(digits[i]) >= base {
			return nil, 0, false
		}
	}
	significant := strings.TrimLeft(digits, "0")
	if significant == "" {
		return new(big.Int), sign, true
	}
	// the value has at least this many bits
	least := math.Floor(float64(len(significant)-1)*log2Of10) + 1
	if perDigit > 0 {
		least = float64((len(significant)-1)*perDigit + bitLen(digitValue(significant[0])))
	}
	if least > float64(maxBits) {
		return nil, sign, true
	}
	v, _ = new(big.Int).SetString(significant, base)
	if sign < 0 {
		v.Neg(v)
	}
	return v, sign, true
}

// digitValue is the value of an ASCII digit or letter, 99 for anything else.
func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// bitLen is the length of a small non-negative number in bits.
func bitLen(n int) int {
	l := 0
	for ; n > 0; n >>= 1 {
		l++
	}
	return l
}
