package transform

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunResults covers skip, awaiting, and the conversion of results.
func TestRunResults(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want map[string]any // nil means skip
	}{
		{"null skips", `export default () => null;`, nil},
		{"undefined overrides nothing", `export default () => {};`, map[string]any{}},
		{"async null skips", `export default async () => { await null; return null; };`, nil},
		{"async undefined overrides nothing", `export default async () => { await null; };`, map[string]any{}},
		{"number overrides nothing", `export default () => 42;`, map[string]any{}},
		{"string overrides nothing", `export default () => "text";`, map[string]any{}},
		{"array overrides nothing", `export default () => [1];`, map[string]any{}},
		{"function overrides nothing", `export default () => () => 1;`, map[string]any{}},
		{"false overrides nothing", `export default async () => false;`, map[string]any{}},
		{"async object", `export default async (ctx) => { const v = await Promise.resolve(ctx.path); await new Promise((r) => r()); return { text: v }; };`, map[string]any{"text": "p"}},
		{"then chain", `export default (ctx) => Promise.resolve(1).then((n) => ({ n: n + 1 }));`, map[string]any{"n": 2.0}},
		{"json semantics", `export default () => ({
			s: "x", n: 1.5, i: 3, t: true, z: null, u: undefined, f() {}, nan: NaN, inf: -Infinity,
			a: [1, undefined, () => 1, "s", [null]], o: { d: new Date(0), nested: { k: "v" } },
			boxed: new String("b"), num: new Number(2), bool: new Boolean(false), sym: Symbol("x"),
			m: new Map([[1, 2]]),
		});`, map[string]any{
			"s": "x", "n": 1.5, "i": 3.0, "t": true, "z": nil, "nan": nil, "inf": nil,
			"a": []any{1.0, nil, nil, "s", []any{nil}}, "o": map[string]any{"d": "1970-01-01T00:00:00.000Z", "nested": map[string]any{"k": "v"}},
			"boxed": "b", "num": 2.0, "bool": false, "m": map[string]any{},
		}},
		{"action fields", `export default (ctx) => ({ kind: "agent", message: "m", name: "N", agentId: "a", wakeMode: "now", sessionKey: "hook:x",
			deliver: false, allowUnsafeExternalContent: true, channel: "last", to: "+1", model: "m1", thinking: "low", timeoutSeconds: 30 });`,
			map[string]any{"kind": "agent", "message": "m", "name": "N", "agentId": "a", "wakeMode": "now", "sessionKey": "hook:x",
				"deliver": false, "allowUnsafeExternalContent": true, "channel": "last", "to": "+1", "model": "m1", "thinking": "low", "timeoutSeconds": 30.0}},
		{"getter runs", `export default () => ({ get g() { return "got"; } });`, map[string]any{"g": "got"}},
		{"top-level toJSON not consulted", `export default () => ({ text: "own", toJSON() { return { via: "toJSON" }; } });`, map[string]any{"text": "own"}},
		{"date overrides nothing", `export default () => new Date(0);`, map[string]any{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, "m.js", tc.src, "", Options{})
			out, err := p.Run(context.Background(), Input{Path: "p"})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !reflect.DeepEqual(out, tc.want) {
				t.Fatalf("Run = %#v\nwant %#v", out, tc.want)
			}
		})
	}
}

// TestRunFailures covers every failure kind that is not a resource limit.
func TestRunFailures(t *testing.T) {
	tests := []struct {
		name string
		src  string
		kind string
		msg  string // substring
	}{
		{"throw error", "export default () => {\n  throw new Error(\"bad input\");\n};", KindThrow, "Error: bad input (at m.js:2:"},
		{"throw string", `export default () => { throw "plain"; };`, KindThrow, "plain"},
		{"type error", `export default (ctx) => ctx.payload.missing.deeper;`, KindThrow, "TypeError"},
		{"async reject", `export default async () => { await null; throw new TypeError("late"); };`, KindThrow, "promise rejected: TypeError: late"},
		{"reject value", `export default () => Promise.reject(42);`, KindThrow, "promise rejected: ##"},
		{"never settles", `export default () => new Promise(() => {});`, KindResult, "never settled"},
		{"bigint", `export default () => ({ n: 1n });`, KindResult, "BigInt"},
		{"circular", `export default () => { const o = {}; o.self = o; return o; };`, KindResult, "nested deeper"},
		{"throwing getter", `export default () => ({ get g() { throw new Error("getter"); } });`, KindThrow, "getter"},
		{"throwing toString in thrown", `export default () => { throw { toString() { throw 1; } }; };`, KindThrow, "could not be read"},
		{"stack overflow", `const f = (n) => f(n + 1) + 1; export default () => f(0);`, KindThrow, "RangeError"},
		{"result too big", `export default () => ({ big: "x".repeat(4000) + "y".repeat(200) });`, KindMemory, "result larger than 4096 bytes"},
		{"result shared too big", `export default () => { const s = "y".repeat(1000); return { a: Array(10).fill(s) }; };`, KindMemory, "result larger"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// a budget no case reaches, however slow the machine: these
			// fail for other reasons (TestTimeBudget is about the budget)
			p := compileSource(t, "m.js", tc.src, "", Options{MaxBytes: 4096, Timeout: hangBound})
			e := runErr(t, p, Input{Payload: map[string]any{}}, tc.kind)
			if !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.msg)
			}
			// The runtime stays usable (or was replaced) after a failure.
			if _, err := p.Run(context.Background(), Input{Payload: map[string]any{}}); err == nil || errors.Is(err, context.Canceled) {
				t.Fatalf("second Run = %v, want the same failure again", err)
			}
		})
	}
}

// TestErrorsKeepPayloadOut reproduces issue 17 item 10: error messages
// that quote payload numbers, object keys, short strings or strings with
// escapes (whether the runtime quotes them or the script throws them)
// reach the log without any of them, but with the error type and the
// script location.
func TestErrorsKeepPayloadOut(t *testing.T) {
	payload := map[string]any{
		"cb": "s3cr3t-token-value", "n": 987654321.0, "f": 0.0625, "short": "xq", "esc": "q\"u\not\\e", "uni": "Zürich—ü",
		"secretKeyName": map[string]any{"deep": "s3cr3t-2"}, "list": []any{"s3cr3t-3", 31337.0},
	}
	secrets := []string{"s3cr3t", "987654321", "9876", "0.0625", "625", "xq", `q"u`, "u\nqt", `q\"u`, "Zürich", "ürich", "secretKeyName", "31337"}
	tests := map[string]string{
		"runtime quotes value":  `(ctx) => [1].map(ctx.payload.cb)`,
		"runtime quotes number": `(ctx) => ctx.payload.n()`,
		"runtime quotes key":    `(ctx) => ctx.payload[Object.keys(ctx.payload).sort().pop()].deep.x.y`,
		"missing member by key": `(ctx) => { const k = Object.keys(ctx.payload)[5]; return ctx.payload.nothing[k]; }`,
		"thrown field":          `(ctx) => { throw new Error("bad: " + ctx.payload.cb + " " + ctx.payload.n + " " + ctx.payload.short); }`,
		"thrown escapes":        `(ctx) => { throw new Error(JSON.stringify(ctx.payload.esc) + ctx.payload.esc + ctx.payload.uni); }`,
		"thrown whole payload":  `(ctx) => { throw new Error(JSON.stringify(ctx.payload)); }`,
		"thrown keys":           `(ctx) => { throw new TypeError("keys " + Object.keys(ctx.payload).join(",")); }`,
		"thrown number fixed":   `(ctx) => { throw ctx.payload.n.toFixed(2) + " " + ctx.payload.f * 2; }`,
		"thrown short word":     `(ctx) => { throw "value xq rejected"; }`,
		"json parse":            `(ctx) => JSON.parse(ctx.payload.esc)`,
		"rejected with value":   `async (ctx) => { await null; throw ctx.payload.list; }`,
		"error name from data":  `(ctx) => { const e = new Error("m"); e.name = ctx.payload.short; throw e; }`,
		"control characters":    "(ctx) => { throw new Error(\"a\\u0000b\\u001bc\\u202ed\\nx\"); }",
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			p := compileSource(t, "m.js", "export default "+fn+";", "", Options{})
			e := runErr(t, p, Input{Payload: payload}, KindThrow)
			for _, s := range secrets {
				if strings.Contains(e.Message, s) || strings.Contains(e.Error(), s) {
					t.Fatalf("message leaks %q: %q", s, e.Message)
				}
			}
			hasLoc := strings.Contains(e.Message, "(at m.js:1:") || name == "rejected with value" // a rejected non-Error has no stack
			if !hasLoc || strings.ContainsAny(e.Message, "\x00\x1b\n\u202e") {
				t.Fatalf("message %q: want the location and no control characters", e.Message)
			}
			if len(e.Message) > maxScriptText+64 {
				t.Fatalf("message of %d bytes", len(e.Message))
			}
			t.Log(e.Message)
		})
	}
}

// TestCtx checks every ctx field the script sees.
func TestCtx(t *testing.T) {
	src := `export default (ctx) => {
  const q = ctx.url.searchParams;
  const seen = [];
  q.forEach((v, k) => seen.push(k + "=" + v));
  return {
    path: ctx.path,
    event: ctx.headers["x-github-event"],
    headerKeys: Object.keys(ctx.headers).join(","),
    pathname: ctx.url.pathname, search: ctx.url.search, href: ctx.url.href, url: String(ctx.url),
    a: q.get("a"), all: q.getAll("a"), hasB: q.has("b"), hasZ: q.has("z"), missing: q.get("z"), size: q.size,
    keys: [...q.keys()].join(","), entries: [...q].map(([k, v]) => k + ":" + v).join(","), str: q.toString(), seen: seen.join("&"),
    tag: Object.prototype.toString.call(q),
    n: ctx.payload.n, deep: ctx.payload.list[1].k, proto: Object.getPrototypeOf(ctx.payload) === Object.prototype,
    ownProto: Object.hasOwn(ctx.payload, "__proto__") ? typeof ctx.payload["__proto__"] : "absent",
    polluted: ({}).polluted === undefined ? "no" : "yes", isArray: Array.isArray(ctx.payload.list),
    payloadKeys: Object.keys(ctx.payload).join(","),
  };
};`
	p := compileSource(t, "m.js", src, "", Options{})
	u, err := url.Parse("/hooks/github?a=1&b=x%20y&a=2&c=%zz&d")
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), Input{
		Payload: map[string]any{"n": 7.0, "list": []any{"x", map[string]any{"k": "v"}}, "__proto__": map[string]any{"polluted": true}},
		Headers: map[string]string{"x-github-event": "push", "content-type": "application/json"},
		Path:    "github",
		URL:     u,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := map[string]any{
		"path": "github", "event": "push", "headerKeys": "content-type,x-github-event",
		"pathname": "/hooks/github", "search": "?a=1&b=x%20y&a=2&c=%zz&d", "href": "/hooks/github?a=1&b=x%20y&a=2&c=%zz&d", "url": "/hooks/github?a=1&b=x%20y&a=2&c=%zz&d",
		"a": "1", "all": []any{"1", "2"}, "hasB": true, "hasZ": false, "missing": nil, "size": 5.0,
		"keys": "a,b,a,c,d", "entries": "a:1,b:x y,a:2,c:%zz,d:", "str": "a=1&b=x+y&a=2&c=%25zz&d=", "seen": "a=1&b=x y&a=2&c=%zz&d=",
		"tag": "[object URLSearchParams]",
		"n":   7.0, "deep": "v", "proto": true, "ownProto": "object", "polluted": "no", "isArray": true,
		"payloadKeys": "__proto__,list,n",
	}
	if !reflect.DeepEqual(out, want) {
		for k, v := range want {
			if !reflect.DeepEqual(out[k], v) {
				t.Errorf("%s = %#v, want %#v", k, out[k], v)
			}
		}
	}
}

// TestCtxWithoutURL: a nil URL gives empty strings and empty params, a
// nil payload an empty object.
func TestCtxWithoutURL(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => ({ h: ctx.url.href, n: ctx.url.searchParams.size, g: ctx.url.searchParams.get("a"), p: Object.keys(ctx.payload).length })`, "", Options{})
	out, err := p.Run(context.Background(), Input{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (map[string]any{"h": "", "n": 0.0, "g": nil, "p": 0.0}); !reflect.DeepEqual(out, want) {
		t.Fatalf("Run = %v, want %v", out, want)
	}
}

// TestInputIsolation: the script's mutations of ctx do not reach the
// caller's maps, and state does not leak between calls through ctx.
func TestInputIsolation(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => {
  const before = ctx.payload.list.length;
  ctx.payload.list.push("added"); ctx.payload.obj.k = "changed"; delete ctx.payload.gone; ctx.headers.x = "y";
  return { before };
};`, "", Options{})
	payload := map[string]any{"list": []any{"a"}, "obj": map[string]any{"k": "orig"}, "gone": true}
	headers := map[string]string{"h": "v"}
	for i := 0; i < 3; i++ {
		out, err := p.Run(context.Background(), Input{Payload: payload, Headers: headers})
		if err != nil {
			t.Fatal(err)
		}
		if out["before"] != 1.0 {
			t.Fatalf("call %d saw list length %v, want 1", i, out["before"])
		}
	}
	want := map[string]any{"list": []any{"a"}, "obj": map[string]any{"k": "orig"}, "gone": true}
	if !reflect.DeepEqual(payload, want) || len(headers) != 1 {
		t.Fatalf("caller data mutated: %v %v", payload, headers)
	}
}

// TestInputErrors: values a JSON decoder never produces are refused.
func TestInputErrors(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => ({})`, "", Options{Timeout: 10 * time.Second})
	deep := map[string]any{}
	cur := deep
	for i := 0; i < maxNesting+5; i++ {
		next := map[string]any{}
		cur["n"] = next
		cur = next
	}
	for name, payload := range map[string]map[string]any{
		"struct": {"x": struct{}{}},
		"deep":   deep,
		"chan":   {"x": make(chan int)},
	} {
		t.Run(name, func(t *testing.T) {
			runErr(t, p, Input{Payload: payload}, KindInput)
		})
	}
}

// TestConcurrentRuns: 200 concurrent calls through one program all
// succeed, each seeing its own input (with a budget no call reaches on a
// loaded machine: the budget is TestTimeBudget's subject).
func TestConcurrentRuns(t *testing.T) {
	opts := Options{Timeout: hangBound}
	p := compileSource(t, "m.ts", `
let calls = 0;
export default async (ctx: any) => {
  calls++;
  let acc = 0;
  for (let i = 0; i < 200; i++) acc += i % 7;
  await null;
  return { id: ctx.payload.id, acc, text: "n" + ctx.payload.id };
};`, "", opts)
	wantAcc := 0.0
	for i := 0; i < 200; i++ {
		wantAcc += float64(i % 7)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out, err := p.Run(context.Background(), Input{Payload: map[string]any{"id": float64(i)}})
			switch {
			case err != nil:
				errs <- fmt.Errorf("call %d: %w", i, err)
			case out["id"] != float64(i) || out["text"] != fmt.Sprintf("n%d", i) || out["acc"] != wantAcc:
				errs <- fmt.Errorf("call %d: got %v", i, out)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if idle := len(p.pool.idle); idle > p.opts.Runtimes {
		t.Fatalf("%d idle runtimes, cap %d", idle, p.opts.Runtimes)
	}
}

// TestContextCanceled: a canceled context stops a running call and is
// reported as a timeout-kind error.
func TestContextCanceled(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => { for (;;) {} }`, "", Options{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Run(ctx, Input{})
	var te *Error
	if !errors.As(err, &te) || te.Kind != KindTimeout || !strings.Contains(te.Message, "canceled") {
		t.Fatalf("Run = %v, want a canceled timeout error", err)
	}
	if d := time.Since(start); d > hangBound { // the budget is a minute: the cancel stopped it
		t.Fatalf("cancel took %v", d)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := p.Run(done, Input{}); !errors.As(err, &te) || te.Kind != KindTimeout {
		t.Fatalf("Run with a done context = %v", err)
	}
}

// TestRuntimeReuse: a healthy runtime is reused (module state persists
// per runtime); one that was interrupted is dropped. The budget is long
// enough that the quick calls never reach it on a loaded machine.
func TestRuntimeReuse(t *testing.T) {
	p := compileSource(t, "m.js", `let n = 0; export default (ctx) => { if (ctx.payload.spin) for (;;) {} return { n: ++n }; }`, "", Options{Timeout: 3 * time.Second})
	run := func(spin bool) (map[string]any, error) {
		return p.Run(context.Background(), Input{Payload: map[string]any{"spin": spin}})
	}
	for want := 1.0; want <= 3; want++ {
		out, err := run(false)
		if err != nil || out["n"] != want {
			t.Fatalf("sequential call = %v, %v; want n=%v (runtime reused)", out, err, want)
		}
	}
	if _, err := run(true); err == nil {
		t.Fatal("spinning call succeeded")
	}
	out, err := run(false)
	if err != nil || out["n"] != 1.0 {
		t.Fatalf("call after interrupt = %v, %v; want n=1 on a fresh runtime", out, err)
	}
}
