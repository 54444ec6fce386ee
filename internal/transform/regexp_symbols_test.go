package transform

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRegExpSymbolMethodsBounded reproduces issue 20 item 4: the RegExp
// symbol methods, reached directly, through call, Reflect.apply, a
// subclass or a non-RegExp receiver, are held to the same bounds as their
// String twins: the result size is checked before it is built, and
// catching the RangeError does not let the script go on. MaxBytes is
// 1 MiB, so the guards and not the allocation watchdog stop each case;
// the time budget is far away. Where the specification's loop never ends
// (an exec that never returns null, a non-global RegExp read as global),
// the allocation watchdog may be what stops it (detail "").
func TestRegExpSymbolMethodsBounded(t *testing.T) {
	tests := []struct{ name, expr, detail string }{
		{"replace $' direct", `/a/g[Symbol.replace](s, "$'")`, "Symbol.replace"},
		{"replace $\x60 direct", "/a/g[Symbol.replace](s, \"$`\")", "Symbol.replace"},
		{"replace via call", `RegExp.prototype[Symbol.replace].call(/a/g, s, "$'$'")`, "Symbol.replace"},
		{"replace via Reflect.apply", `Reflect.apply(RegExp.prototype[Symbol.replace], /a/g, [s, "$'"])`, "Symbol.replace"},
		{"replace via bound function", `RegExp.prototype[Symbol.replace].bind(/a/g)(s, "$'")`, "Symbol.replace"},
		{"replace in a subclass", `(() => { class R extends RegExp {} return new R("a", "g")[Symbol.replace](s, "$'"); })()`, "Symbol.replace"},
		{"replace, subclass exec", `(() => { class R extends RegExp { exec(x) { return super.exec(x); } } return s.replace(new R("a", "g"), "$'"); })()`, "Symbol.replace"},
		{"replace, flags getter lies", `(() => { class R extends RegExp { get flags() { return "g"; } } return s.replace(new R("a"), "$'"); })()`, ""},
		{"replace, forged results", `RegExp.prototype[Symbol.replace].call({ flags: "g", lastIndex: 0, exec() { return this.lastIndex++ < s.length ? { 0: "a", index: this.lastIndex - 1, length: 1 } : null; } }, s, "$'")`, "Symbol.replace"},
		{"replace function", `/a/g[Symbol.replace](s, () => "y".repeat(1000))`, "Symbol.replace"},
		{"replace plain string", `/a/g[Symbol.replace](s, "y".repeat(400))`, "Symbol.replace"},
		{"split", `/(?:)/[Symbol.split]("x".repeat(1e6))`, "Symbol.split"},
		{"split captures", `/()()()()()()()()()()/[Symbol.split]("x".repeat(1e5))`, "Symbol.split"},
		{"split via call", `RegExp.prototype[Symbol.split].call(/(?:)/, "x".repeat(1e6))`, "Symbol.split"},
		{"split, forged exec", `RegExp.prototype[Symbol.split].call({ constructor: { [Symbol.species]: function () { return { exec: Object, lastIndex: 0 }; } }, flags: "" }, "xy".repeat(2000))`, "Symbol.split"},
		{"match", `/(?:)/g[Symbol.match]("x".repeat(1e6))`, "Symbol.match"},
		{"match via Reflect.apply", `Reflect.apply(RegExp.prototype[Symbol.match], /x/g, ["x".repeat(1e6)])`, "Symbol.match"},
		{"match, exec never null", `RegExp.prototype[Symbol.match].call({ flags: "g", lastIndex: 0, exec: Object }, "abc")`, ""},
		{"string match", `"x".repeat(1e6).match(/x/g)`, "match"},
	}
	payload := strings.Repeat("a", 3000)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "export default (ctx) => { const s = ctx.payload.s; try { const v = " + tc.expr + "; return { len: v.length }; } catch (e) { for (let i = 0; i < 1e5; i++); return { caught: String(e) }; } };"
			p := compileSource(t, "m.js", src, "", Options{Timeout: hangBound, MaxBytes: 1 << 20})
			e := runErr(t, p, Input{Payload: map[string]any{"s": payload}}, KindMemory)
			if !strings.Contains(e.Message, tc.detail) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.detail)
			}
		})
	}
}

// TestRegExpSymbolAttackMemory reproduces the attack of issue 20 item 4
// as reported: RegExp.prototype[Symbol.replace] with $' on a 30 KB
// payload, and the uninterruptible split and match loops. With default
// options each call is stopped (by a guard, or by the time budget on a slow
// machine), the worker gives its slot back
// (nothing runs on after the call was given up), and the process grows by
// well under 256 MiB (before the fix: 1.4 GiB, 360 MiB and 3.5 GiB).
func TestRegExpSymbolAttackMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	const limit = 256 << 20
	exprs := map[string]string{
		"replace $'":    `/a/g[Symbol.replace](s, "$'")`,
		"replace $\x60": "RegExp.prototype[Symbol.replace].call(/a/g, s, \"$`\")",
		"split":         `/(?:)/[Symbol.split]("x".repeat(4e6))`,
		"match":         `/(?:)/g[Symbol.match]("x".repeat(4e6))`,
	}
	payload := strings.Repeat("a", 30000)
	for name, expr := range exprs {
		t.Run(name, func(t *testing.T) {
			p := compileSource(t, "m.js", "export default (ctx) => { const s = ctx.payload.s; try { return { n: "+expr+".length }; } catch (e) { for (;;); } };", "",
				Options{Timeout: 200 * time.Millisecond})
			checkStopped(t, p, Input{Payload: map[string]any{"s": payload}}, limit)
		})
	}
}

// TestRegExpSymbolPatternsChecked: a RegExp symbol method called on an
// object that is not a RegExp builds its matcher through the sandbox's
// checked constructor, so the object's text cannot smuggle in a pattern
// the constructor would refuse (goja's default is its own constructor,
// which compiled a 90,000-character nested pattern for a second and more,
// uninterruptibly).
func TestRegExpSymbolPatternsChecked(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => {
  const evil = { flags: "", toString() { return "(?=".repeat(30000) + "a" + ")".repeat(30000); } };
  const out = {};
  const tries = {
    split: () => RegExp.prototype[Symbol.split].call(evil, "a"),
    matchAll: () => RegExp.prototype[Symbol.matchAll].call(evil, "a"),
    source: () => RegExp.prototype[Symbol.split].call({ flags: "", [Symbol.match]: true, source: "(".repeat(5000) + ")".repeat(5000) }, "a"),
    stringMatch: () => "a".match({ toString: evil.toString }),
    ordinary: () => RegExp.prototype[Symbol.split].call({ flags: "", toString() { return ","; } }, "a,b").join("+"),
  };
  for (const [k, f] of Object.entries(tries)) { try { out[k] = String(f()); } catch (e) { out[k] = e.name; } }
  return out;
};`, "", Options{Timeout: hangBound})
	out, err := p.Run(context.Background(), Input{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"split": "SyntaxError", "matchAll": "SyntaxError", "source": "SyntaxError", "stringMatch": "SyntaxError", "ordinary": "a+b"}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
}

// TestRegExpSymbolsFollowTheSpecification: where goja's generic paths
// differ from the specification, the sandbox's methods give what Node
// gives.
func TestRegExpSymbolsFollowTheSpecification(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => ({ r: JSON.stringify([
  "abc".split(/b/, -1),
  "abc".split(/b/, 2 ** 32 + 1),
  "a1b22".match(/\d*/g),
]) });`, "", Options{})
	out, err := p.Run(context.Background(), Input{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[["a","c"],["a"],["","1","","22",""]]`; out["r"] != want {
		t.Fatalf("got %v, want %s", out["r"], want)
	}
}
