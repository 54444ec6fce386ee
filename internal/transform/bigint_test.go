package transform

import (
	"context"
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBigIntAttacks reproduces issue 34 item B2: BigInt built-ins and
// operators fed a number or string from the payload. Before, the first
// case ended the process ("fatal error: runtime: out of memory": goja
// asked Go for 2^40 bits), the shift built 500 MB and answered, and the
// comparisons read a 4-million-digit string for 17 s, far past the call's
// 1 s budget. Each is now refused before it allocates (KindMemory, even
// when the script catches the RangeError) or answered from the string's
// length, the process grows by well under 64 MiB, and the next call runs.
func TestBigIntAttacks(t *testing.T) {
	digits := strings.Repeat("7", 4e6)
	tests := []struct {
		name, expr string
		payload    map[string]any
		detail     string // the refusal's message; "" for an answer
		want       any    // the answer
	}{
		{"asUintN", `BigInt.asUintN(p.bits, -1n)`, map[string]any{"bits": float64(1 << 40)}, "BigInt.asUintN", nil},
		{"asUintN via call", `BigInt.asUintN.call(null, p.bits, -1n)`, map[string]any{"bits": float64(1 << 40)}, "BigInt.asUintN", nil},
		{"shift", `1n << BigInt(p.n)`, map[string]any{"n": 4e9}, "BigInt shift", nil},
		{"shift right by a negative", `1n >> -BigInt(p.n)`, map[string]any{"n": 4e9}, "BigInt shift", nil},
		{"shift assignment", `(() => { let x = 1n; x <<= BigInt(p.n); return x; })()`, map[string]any{"n": 4e9}, "BigInt shift", nil},
		{"exponent", `2n ** BigInt(p.n)`, map[string]any{"n": 4e9}, "BigInt exponentiation", nil},
		{"exponent of a tagged template", "((s) => 2n)`x` ** BigInt(p.n)", map[string]any{"n": 4e9}, "BigInt exponentiation", nil},
		{"exponent assignment to a property", `(() => { const o = { v: 3n }; o.v **= BigInt(p.n); return o.v; })()`, map[string]any{"n": 4e9}, "BigInt exponentiation", nil},
		{"squaring", `(() => { let x = BigInt(p.s); for (;;) x = x * x; })()`, map[string]any{"s": "12345678901234567890"}, "BigInt multiplication", nil},
		{"squaring an element", `(() => { const a = [BigInt(p.s)]; for (let i = 0; ; i++) a[i % 1] *= a[0]; })()`, map[string]any{"s": "12345678901234567890"}, "BigInt multiplication", nil},
		{"squaring through valueOf", `(() => { let x = { valueOf: () => BigInt(p.s) }; for (;;) x = { valueOf: ((v) => () => v)(x * x) }; })()`, map[string]any{"s": "12345678901234567890"}, "BigInt multiplication", nil},
		{"from a string", `BigInt(p.digits)`, map[string]any{"digits": digits}, "BigInt from a string", nil},
		{"asIntN of a string", `BigInt.asIntN(64, p.digits)`, map[string]any{"digits": digits}, "BigInt from a string", nil},
		{"less than a string", `5n < p.digits`, map[string]any{"digits": digits}, "", true},
		{"equal to a string", `p.digits == 5n`, map[string]any{"digits": digits}, "", false},
		{"greater than an object's string", `5n > { toString: () => "-" + p.digits }`, map[string]any{"digits": digits}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "export default (ctx) => { const p = ctx.payload; if (p.benign) return { ok: 2n ** 64n > 1n }; try { return { r: " + tc.expr + " }; } catch (e) { return { caught: String(e) }; } };"
			p := compileSource(t, "m.js", src, "", Options{Timeout: time.Second, Runtimes: 1})
			var out map[string]any
			var err error
			goPeak, rssPeak := memoryGrowth(t, func() { out, err = p.Run(context.Background(), Input{Payload: tc.payload}) })
			t.Logf("%v, %v; Go memory +%d MiB, peak RSS +%d MiB", out, err, goPeak>>20, rssPeak>>20)
			if tc.detail != "" {
				var e *Error
				if !errors.As(err, &e) || e.Kind != KindMemory || !strings.Contains(e.Message, tc.detail) {
					t.Fatalf("Run = %v, %v; want a memory stop naming %q", out, err, tc.detail)
				}
			} else if err != nil || out["r"] != tc.want {
				t.Fatalf("Run = %v, %v; want r = %v", out, err, tc.want)
			}
			if limit := int64(64 << 20); goPeak > limit || rssPeak > limit {
				t.Fatalf("memory grew by %d MiB (Go) / %d MiB (RSS), limit %d MiB", goPeak>>20, rssPeak>>20, limit>>20)
			}
			if out, err := p.Run(context.Background(), Input{Payload: map[string]any{"benign": true}}); err != nil || out["ok"] != true {
				t.Fatalf("the next call = %v, %v", out, err)
			}
		})
	}
}

// TestBigIntSemantics: what a BigInt module computes with its operators
// compiled as checked operations is what Node computes (the expected
// values are Node 20's), for BigInts, for the numbers and strings the same
// operators see in ordinary code, and for each form of compound
// assignment.
func TestBigIntSemantics(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"Number(x >> 22n) + 1420070400000", "1462015105796"},
		{"2n ** 64n", "18446744073709551616n"},
		{"(-3n) ** 3n", "-27n"},
		{"2n ** -1n", "RangeError"},
		{"1n << 100n", "1267650600228229401496703205376n"},
		{"-5n >> 1n", "-3n"},
		{"5n >> -3n", "40n"},
		{"5n << -1n", "2n"},
		{"7n * -6n", "-42n"},
		{"3 * 4", "12"},
		{"\"3\" * \"4\"", "12"},
		{"1n * 2", "TypeError"},
		{"({ valueOf: () => 5n }) * 3n", "15n"},
		{"2 ** 10", "1024"},
		{"1 << 31", "-2147483648"},
		{"-16 >> 2", "-4"},
		{"10n < \"11\"", "true"},
		{"\"11\" > 10n", "true"},
		{"10n <= \" 0x0a \"", "true"},
		{"10n >= \"abc\"", "false"},
		{"10n < \"abc\"", "false"},
		{"10n == \"10\"", "true"},
		{"10n == \"1e1\"", "false"},
		{"\"-0\" == 0n", "true"},
		{"10n != \"10\"", "false"},
		{"10n == 10", "true"},
		{"10n == true", "false"},
		{"1n == true", "true"},
		{"({ valueOf: () => \"10\" }) == 10n", "true"},
		{"({ toString: () => \"10\" }) == 10n", "true"},
		{"5n < { valueOf: () => \"9\".repeat(100) }", "true"},
		{"-5n > \"-\" + \"9\".repeat(100)", "true"},
		{"5n == \"9\".repeat(100)", "false"},
		{"null == undefined", "true"},
		{"null == 0", "false"},
		{"\"1\" == 1", "true"},
		{"[] == \"\"", "true"},
		{"[1] == 1", "true"},
		{"NaN < 1n", "false"},
		{"1n < NaN", "false"},
		{"1n < Infinity", "true"},
		{"2n > 1.5", "true"},
		{"\"b\" > \"a\"", "true"},
		{"BigInt(\"  123  \")", "123n"},
		{"BigInt(\"-0\")", "0n"},
		{"BigInt(\"\")", "0n"},
		{"BigInt(\"0x1f\")", "31n"},
		{"BigInt(\"-0x1f\")", "SyntaxError"},
		{"BigInt(\"0777777777777777777777777\")", "777777777777777777777777n"},
		{"BigInt(\"1_000\")", "SyntaxError"},
		{"BigInt(12)", "12n"},
		{"BigInt(1.5)", "RangeError"},
		{"BigInt(true)", "1n"},
		{"BigInt(null)", "TypeError"},
		{"BigInt()", "TypeError"},
		{"BigInt({ valueOf: () => 7 })", "7n"},
		{"new BigInt(1)", "TypeError"},
		{"BigInt.asUintN(8, 257n)", "1n"},
		{"BigInt.asIntN(8, 255n)", "-1n"},
		{"BigInt.asUintN(64, -1n)", "18446744073709551615n"},
		{"BigInt.asIntN(64, \"18446744073709551615\")", "-1n"},
		{"BigInt.asUintN(2 ** 40, 5n)", "5n"},
		{"BigInt.asIntN(2 ** 40, -5n)", "-5n"},
		{"BigInt.asUintN(-1, 5n)", "RangeError"},
		{"BigInt.asUintN(8, 5)", "TypeError"},
		{"BigInt.asUintN.length + BigInt.asUintN.name", "2asUintN"},
		{"BigInt.name + BigInt.length", "BigInt1"},
		{"(5n).constructor === BigInt", "true"},
		{"Object(5n) instanceof BigInt", "true"},
		{"typeof BigInt.prototype.toString", "function"},
		{"{ let a = 3n; a *= 4n; a **= 2n; a <<= 2n; a >>= 1n; return a; }", "288n"},
		{"{ const o = { v: 3n }; o.v *= 5n; o[\"v\"] **= 2n; return o.v; }", "225n"},
		{"{ const o = { v: 3n }; const k = \"v\"; o[k] <<= 3n; return o.v; }", "24n"},
		{"{ let n = 0; const o = { get v() { n++; return 2n; }, set v(x) { this.w = x; } }; o.v *= 3n; return o.w + BigInt(n); }", "7n"},
		{"{ let calls = 0; const g = () => { calls++; return { v: 2n }; }; const r = g(); const o = g(); o.v *= 5n; return o.v + BigInt(calls); }", "12n"},
		{"{ let calls = 0; const arr = [1n, 2n]; const idx = () => { calls++; return 1; }; arr[idx()] *= 10n; return arr[1] + BigInt(calls); }", "21n"},
		{"{ class C { #p = 3n; m() { this.#p *= 7n; return this.#p; } } return new C().m(); }", "21n"},
		{"{ class A { get x() { return 3n; } set x(v) { this.y = v; } } class B extends A { m() { super.x *= 2n; return this.y; } } return new B().m(); }", "6n"},
		{"{ let i = 0, s = 0; for (; i < 10; i++) s += i * i; return s; }", "285"},
		{"{ const k = { toString() { return \"v\"; } }; const o = { v: 2n }; o[k] *= 3n; return o.v; }", "6n"},
		{"{ const a = []; for (let i = 0n; i < 5n; i++) a.push(i * i); return a.join(\",\"); }", "0,1,4,9,16"},
		{"((s, ...v) => 3n)`a` * 2n", "6n"},
		{"2n * -3n", "-6n"},
		{"-(-2n) * 3n", "6n"},
		{"`${2n}` * 3n", "TypeError"},
		{"+\"2\" * 3n", "TypeError"},
		{"2n ** 3", "TypeError"},
		{"(() => 2n)() ** 3n", "8n"},
		{"10n < `11`", "true"},
		{"typeof 1n == \"bigint\"", "true"},
	}
	var b strings.Builder
	b.WriteString(`export default (ctx) => {
  const x = BigInt(ctx.payload.id);
  const S = (v) => typeof v === "bigint" ? v.toString() + "n" : String(v);
  const out = [];
  const t = (f) => { try { out.push(S(f())); } catch (e) { out.push(e.name); } };
`)
	for _, tc := range tests {
		b.WriteString("  t(() => " + tc.expr + ");\n")
	}
	b.WriteString("  return { out };\n};\n")
	p := compileSource(t, "m.mjs", b.String(), "", Options{})
	if !p.bigint {
		t.Fatal("the module was not compiled as a BigInt module")
	}
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"id": "175928847299117063"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out["out"].([]any)
	if len(got) != len(tests) {
		t.Fatalf("%d results for %d expressions", len(got), len(tests))
	}
	for i, tc := range tests {
		if got[i] != tc.want {
			t.Errorf("%s = %v, want %s", tc.expr, got[i], tc.want)
		}
	}
}

// TestBigIntOnlyWhereUsed: a module that neither writes a BigInt literal
// nor names BigInt runs without the BigInt function (it has no way to
// make one, so its operators stay goja's own); one that does keeps it.
func TestBigIntOnlyWhereUsed(t *testing.T) {
	probe := `typeof globalThis[["Big", "Int"].join("")] + "/" + Object.getOwnPropertyNames(globalThis).filter((n) => n.startsWith("Big")).length`
	tests := []struct {
		name, src string
		bigint    bool
		want      string
	}{
		{"no BigInt", `export default () => ({ r: ` + probe + ` });`, false, "undefined/0"},
		{"a literal", `export default () => ({ r: ` + probe + `, n: String(1n) });`, true, "function/1"},
		{"the name", `export default () => ({ r: ` + probe + `, n: typeof BigInt });`, true, "function/1"},
		{"the name in a string", `export default () => ({ r: ` + probe + `, s: "BigInt" });`, true, "function/1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, "m.js", tc.src, "", Options{})
			out, err := p.Run(context.Background(), Input{})
			if err != nil || p.bigint != tc.bigint || out["r"] != tc.want {
				t.Fatalf("bigint %v, Run = %v, %v; want bigint %v, r %s", p.bigint, out, err, tc.bigint, tc.want)
			}
		})
	}
}

// TestBigIntRewriteRefusals: what the checked operators cannot express is
// refused when the module is compiled, naming the place: a compound
// assignment to a private field of an object that cannot be evaluated
// twice, or through super by a computed key, and the name the wrapper
// reserves.
func TestBigIntRewriteRefusals(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"private field of a call", "class C {\n  #v = 1n;\n  static m(f) { f().#v *= 2n; }\n}\nexport default () => ({ c: String(C) });", `m\.js:3:\d+: .*compound assignment \(\*=\) cannot be checked`},
		{"super by a computed key", "class A {}\nclass B extends A {\n  m(k) { super[k()] <<= 2n; }\n}\nexport default () => ({ b: String(B) });", `m\.js:3:\d+: .*\(<<=\) cannot be checked`},
		{"the reserved name", "const __caddyhook_bigint = 1;\nexport default () => ({ n: String(1n + BigInt(__caddyhook_bigint)) });", "the name __caddyhook_bigint is reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(writeFile(t, t.TempDir(), "m.js", tc.src), "", Options{})
			if err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("Compile = %v, want an error matching %q", err, tc.want)
			}
		})
	}
}

// TestBigIntErrorLocation: an error a checked operator throws is reported
// at the operator in the module's own source, as goja's operator would be.
func TestBigIntErrorLocation(t *testing.T) {
	p := compileSource(t, "m.ts", "export default (ctx: { payload: { n: number } }) => {\n  const big: bigint = 5n;\n  return { r: String(big * (ctx.payload.n as any)) };\n};", "", Options{})
	e := runErr(t, p, Input{Payload: map[string]any{"n": 2.0}}, KindThrow)
	if !strings.HasPrefix(e.Message, "TypeError") || !strings.Contains(e.Message, "(at m.ts:3:") {
		t.Fatalf("message %q, want a TypeError at m.ts:3", e.Message)
	}
}

// FuzzParseBigInt checks parseBigInt, StringToBigInt, against the
// grammar of ECMA-262 7.1.14 and math/big: a string is read when it is
// white space around a decimal integer with an optional sign or 0b/0o/0x
// digits without one, and then to the value big.Int reads from its digits;
// past the bit limit, not built but with the right sign.
func FuzzParseBigInt(f *testing.F) {
	for _, s := range []string{"", " ", "0", "-0", "+12", " 123\n", "0x1F", "0X1f", "0o17", "0b101", "-0x1", "0x", "1_000",
		"0777777777777777777777777", "1e3", "\u00a012\u3000", "\u008512", "\ufeff7", "99999999999999999999999", "-" + strings.Repeat("9", 200), "0b" + strings.Repeat("1", 300)} {
		f.Add(s, int64(256))
	}
	grammar := regexp.MustCompile(`^(?:[+-]?([0-9]+)|0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+))$`)
	f.Fuzz(func(t *testing.T, s string, maxBits int64) {
		maxBits = max(1, maxBits%4096)
		v, sign, ok := parseBigInt(s, maxBits)
		trimmed := strings.TrimFunc(s, isJSSpace)
		if trimmed == "" {
			if !ok || v == nil || v.Sign() != 0 {
				t.Fatalf("%q: %v, %v; want 0n", s, v, ok)
			}
			return
		}
		m := grammar.FindStringSubmatch(trimmed)
		if ok != (m != nil) {
			t.Fatalf("%q: ok %v, grammar %v", s, ok, m != nil)
		}
		if !ok {
			return
		}
		want := new(big.Int)
		for i, base := range []int{10, 16, 8, 2} {
			if m[i+1] != "" {
				want.SetString(m[i+1], base)
			}
		}
		if strings.HasPrefix(trimmed, "-") {
			want.Neg(want)
		}
		switch {
		case v == nil:
			if int64(want.BitLen()) <= maxBits || sign != want.Sign() {
				t.Fatalf("%q: not built (sign %d) with %d bits, limit %d", s, sign, want.BitLen(), maxBits)
			}
		case v.Cmp(want) != 0:
			t.Fatalf("%q: %v, want %v", s, v, want)
		case int64(v.BitLen()) > maxBits+4: // a decimal digit is up to log2(10) bits
			t.Fatalf("%q: built %d bits, limit %d", s, v.BitLen(), maxBits)
		}
	})
}
