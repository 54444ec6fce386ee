package transform

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileLabel is the payload of issue 17 item 1: with the regexp below,
// a backtracking engine needs about 2^30 steps to fail.
const hostileLabel = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"

// TestBacktrackingRegexpAttack reproduces issue 17 item 1: a transform
// testing a lookahead regexp against a hostile label, sent once per
// runtime of the pool. Every call ends as a timeout, every slot comes
// back (no call stays stuck in the engine), and the next benign call
// runs.
func TestBacktrackingRegexpAttack(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => ({ ok: /^(?=[a-z])(\w+\s?)*$/i.test(ctx.payload.label) });`, "", Options{})
	var wg sync.WaitGroup
	errs := make([]error, p.opts.Runtimes)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Run(context.Background(), Input{Payload: map[string]any{"label": hostileLabel}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindTimeout {
			t.Fatalf("call %d = %v, want a timeout", i, err)
		}
	}
	waitUntil(t, "every slot given back and no zombie left", func() bool { return len(p.pool.slots) == 0 && p.pool.zombieCount() == 0 })
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"label": "hello world"}})
	if err != nil || out["ok"] != true {
		t.Fatalf("benign call after the attack = %v, %v", out, err)
	}
}

// TestBacktrackingRegexpEveryPath: every built-in that matches a regular
// expression is bounded, also when the call's own budget is far away
// (then the match-time limit is what stops it, with its own message).
func TestBacktrackingRegexpEveryPath(t *testing.T) {
	exprs := map[string]string{
		"test":          `/^(?=[a-z])(\w+\s?)*$/i.test(s)`,
		"exec":          `/^(\w+\s?)*(?<=x)$/.exec(s)`,
		"backreference": `/^(a+)+\1$/.test(s)`,
		"match":         `s.match(/^(?=a)(a+)+$/)`,
		"match global":  `s.match(/(?=a)(a+)+$/g)`,
		"matchAll":      `[...s.matchAll(/(?=a)(a+)+$/g)]`,
		"replace":       `s.replace(/^(?=a)(a+)+$/, "x")`,
		"replace fn":    `s.replace(/(?=a)(a+)+$/g, () => "x")`,
		"split":         `s.split(/(?=a)(a+)+$/)`,
		"search":        `s.search(/(?=a)(a+)+$/)`,
		"string source": `s.search("(?=a)(a+)+$")`,
		"constructed":   `new RegExp("^(?=a)(a+)+$").test(s)`,
		"lastIndex":     `(() => { const r = /(a+)+$/g; r.lastIndex = 1; return r.exec(s); })()`,
	}
	for name, expr := range exprs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := compileSource(t, "m.js", "export default (ctx) => { const s = ctx.payload.s; try { return { r: String("+expr+") }; } catch (e) { return { caught: String(e) }; } };", "",
				Options{Timeout: 30 * time.Second})
			start := time.Now()
			e := runErr(t, p, Input{Payload: map[string]any{"s": strings.Repeat("a", 40) + "!"}}, KindTimeout)
			if !strings.Contains(e.Message, "regular expression") {
				t.Fatalf("message %q", e.Message)
			}
			if elapsed := time.Since(start); elapsed > 15*time.Second {
				t.Fatalf("stopped after %v, far beyond the match-time limit", elapsed)
			}
		})
	}
}

// TestRegexpPatternsAtRunTime: patterns compiled at run time (from data)
// are refused before compiling when they are long or deeply nested;
// ordinary ones compile.
func TestRegexpPatternsAtRunTime(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => {
  const out = {};
  const tries = {
    nested: () => new RegExp("(?=".repeat(1e5) + "a" + ")".repeat(1e5)),
    long: () => RegExp("a".repeat(1e5)),
    viaMatch: () => "abc".match("(".repeat(5000) + ")".repeat(5000)),
    viaCompile: () => /a/.compile("(".repeat(5000) + ")".repeat(5000)),
    viaToString: () => new RegExp({ n: 0, toString() { return this.n++ === 0 ? "a" : "(".repeat(5000) + ")".repeat(5000); } }).source,
    ordinary: () => new RegExp(ctx.payload.word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i").test("Say HELLO (there)"),
  };
  for (const [k, f] of Object.entries(tries)) { try { out[k] = String(f()); } catch (e) { out[k] = e.name; } }
  return out;
};`, "", Options{Timeout: 10 * time.Second})
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"word": "hello (there)"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"nested": "SyntaxError", "long": "SyntaxError", "viaMatch": "SyntaxError", "viaCompile": "SyntaxError",
		"viaToString": "a", "ordinary": "true"}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
}

// TestNativeLoopsStop: spreads, destructuring and collection constructors
// loop natively over an iterator; object spread and rest are lowered to
// script loops. All of them stop at the time or memory budget instead of
// running (and allocating) on after the call has failed.
func TestNativeLoopsStop(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	const limit = 256 << 20
	exprs := map[string]string{
		"array spread":        `[...Array(1e9)].length`,
		"call spread":         `Math.max(...Array(1e9))`,
		"string spread":       `[..."x".repeat(8e6)].length`,
		"destructuring rest":  `(() => { const [a, ...rest] = Array(1e9); return rest.length; })()`,
		"set from array":      `new Set(Array(1e9)).size`,
		"map from entries":    `new Map(Array(1e9).keys().map ? [] : Array(1e9)).size`,
		"object spread":       `Object.keys({ ..."x".repeat(4e6) }).length`,
		"object rest":         `(() => { const { a, ...rest } = "x".repeat(4e6); return Object.keys(rest).length; })()`,
		"spread of generator": `[...(function* () { for (;;) yield 1; })()].length`,
	}
	for name, expr := range exprs {
		t.Run(name, func(t *testing.T) {
			p := compileSource(t, "m.js", "export default () => { try { return { n: "+expr+" }; } catch (e) { for (;;); } };", "",
				Options{Timeout: 200 * time.Millisecond})
			checkStopped(t, p, Input{}, limit)
		})
	}
}

// checkStopped runs p on in and requires a time or memory stop, after
// which the worker gives its slot back (nothing runs on), the process
// having grown by at most limit bytes meanwhile.
func checkStopped(t *testing.T, p *Program, in Input, limit int64) {
	t.Helper()
	var err error
	goPeak, rssPeak := memoryGrowth(t, func() {
		_, err = p.Run(context.Background(), in)
		// the call is over only when its worker gave the slot back
		waitUntil(t, "the worker ends", func() bool { return len(p.pool.slots) == 0 && p.pool.zombieCount() == 0 })
	})
	var e *Error
	if !errors.As(err, &e) || (e.Kind != KindTimeout && e.Kind != KindMemory) {
		t.Fatalf("Run = %v, want a timeout or memory stop", err)
	}
	t.Logf("%s: Go memory +%d MiB, peak RSS +%d MiB", e.Message, goPeak>>20, rssPeak>>20)
	if goPeak > limit || rssPeak > limit {
		t.Fatalf("memory grew by %d MiB (Go) / %d MiB (RSS), limit %d MiB", goPeak>>20, rssPeak>>20, limit>>20)
	}
}

// TestPrototypePollutionDoesNotPersist reproduces issue 17 item 8: a
// transform with a naive deep merge, fed "__proto__" payloads, must not
// change what later requests on the same runtime see. One runtime, so
// every call shares it.
func TestPrototypePollutionDoesNotPersist(t *testing.T) {
	p := compileSource(t, "merge.js", `function merge(target, source) {
  for (const k in source) {
    const v = source[k];
    if (typeof v === "object" && v !== null) {
      if (typeof target[k] !== "object" || target[k] === null) target[k] = {};
      merge(target[k], v);
    } else {
      target[k] = v;
    }
  }
  return target;
}
export default (ctx) => {
  const opts = merge({}, ctx.payload);
  const defaults = {};
  return { message: "m", sessionKey: defaults.sessionKey ?? opts.key ?? "hook:default" };
};`, "", Options{Runtimes: 1})
	for _, poison := range []map[string]any{
		{"__proto__": map[string]any{"sessionKey": "hook:attacker"}},
		{"constructor": map[string]any{"prototype": map[string]any{"sessionKey": "hook:attacker"}}},
		{"a": map[string]any{"__proto__": map[string]any{"sessionKey": "hook:attacker"}}},
	} {
		for range 12 {
			_, _ = p.Run(context.Background(), Input{Payload: poison}) // may fail: the prototype is frozen
		}
	}
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{}})
	if err != nil || out["sessionKey"] != "hook:default" {
		t.Fatalf("benign call after the poisoning = %v, %v; want sessionKey hook:default", out, err)
	}
}

// TestRealmFrozenBetweenCalls: whatever one call tries to change in the
// built-ins, the global object or the ctx classes, the next call on the
// same runtime sees the pristine realm; assignments that shadow an
// inherited built-in property keep working.
func TestRealmFrozenBetweenCalls(t *testing.T) {
	p := compileSource(t, "m.js", `const probe = (ctx) => JSON.stringify([
  ({}).sessionKey, [].evil, typeof globalThis.leak, String({}), [1, 2].join(), "a b".trim === String.prototype.trim,
  JSON.stringify({ a: 1 }), /x/.test("x"), ctx.url.searchParams.get("q"), (() => 1).call(), Math.max(1, 2), typeof Object.assign,
]);
export default (ctx) => {
  if (!ctx.payload.poison) return { probe: probe(ctx) };
  const tries = [
    () => { Object.prototype.sessionKey = "x"; }, () => { Array.prototype.evil = 1; }, () => { globalThis.leak = 1; },
    () => { Object.prototype.toString = () => "evil"; }, () => { Array.prototype.join = () => "evil"; },
    () => { String.prototype.trim = () => "evil"; }, () => { JSON.stringify = () => "evil"; },
    () => { RegExp.prototype.test = () => false; }, () => { Object.getPrototypeOf(ctx.url.searchParams).get = () => "evil"; },
    () => { Function.prototype.call = () => 2; }, () => { Math.max = () => 0; }, () => { Object.assign = 1; },
    () => { Object.defineProperty(Object.prototype, "sessionKey", { value: "x" }); }, () => { Object.setPrototypeOf(Array.prototype, { evil: 1 }); },
    () => { delete Array.prototype.join; }, () => { var g = Function("return this")(); g.leak = 1; },
  ];
  let refused = 0;
  for (const f of tries) { try { f(); } catch (e) { refused++; } }
  class E extends Error { constructor(m) { super(m); this.name = "E"; } }
  const o = {}; o.toString = () => "own"; o.constructor = "c";
  return { refused, shadow: String(new E("x")) + "/" + String(o) + "/" + o.constructor };
};`, "", Options{Runtimes: 1})
	u, _ := url.Parse("/hooks/x?q=1")
	in := Input{Payload: map[string]any{}, URL: u}
	before, err := p.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"poison": true}, URL: u})
	if err != nil || out["shadow"] != "E: x/own/c" {
		t.Fatalf("poisoning call = %v, %v", out, err)
	}
	after, err := p.Run(context.Background(), in)
	if err != nil || after["probe"] != before["probe"] {
		t.Fatalf("probe after the poisoning = %v, %v; before %v", after, err, before)
	}
}
