package transform

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSandboxGlobals: nothing but pure ECMAScript is reachable; Date and
// Math.random work.
func TestSandboxGlobals(t *testing.T) {
	p := compileSource(t, "m.js", `export default () => {
  const names = ["require", "process", "module", "exports", "global", "setTimeout", "setInterval", "setImmediate",
    "clearTimeout", "queueMicrotask", "fetch", "XMLHttpRequest", "WebSocket", "console", "Deno", "Bun", "GoError",
    "ArrayBuffer", "SharedArrayBuffer", "DataView", "Uint8Array", "Float64Array", "BigInt64Array", "TextEncoder", "Buffer", "__dirname", "importScripts"];
  const types = {};
  for (const n of names) types[n] = typeof globalThis[n];
  let viaEval;
  try { viaEval = typeof eval("require"); } catch (e) { viaEval = e.name; }
  const refused = [];
  for (const make of [() => Function("return typeof this.process"), () => new Function("return 1"),
    () => (() => {}).constructor("return 1"), () => Object.getPrototypeOf(function* () {}).constructor("yield 1"),
    () => Object.getPrototypeOf(async function () {}).constructor("return 1")]) {
    try { make(); refused.push("made"); } catch (e) { refused.push(e.name); }
  }
  const r = Math.random();
  return { types, viaEval, refused: refused.join(","), isFn: (() => 1) instanceof Function && typeof Function.prototype.call,
    now: typeof Date.now(), dateOK: new Date(86400000).toISOString(), random: r >= 0 && r < 1 };
};`, "", Options{})
	out, err := p.Run(context.Background(), Input{})
	if err != nil {
		t.Fatal(err)
	}
	types := out["types"].(map[string]any)
	for name, typ := range types {
		if typ != "undefined" {
			t.Errorf("typeof %s = %v, want undefined", name, typ)
		}
	}
	want := map[string]any{"viaEval": "ReferenceError", "refused": "EvalError,EvalError,EvalError,EvalError,EvalError", "isFn": "function",
		"now": "number", "dateOK": "1970-01-02T00:00:00.000Z", "random": true}
	for k, v := range want {
		if !reflect.DeepEqual(out[k], v) {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
}

// TestSandboxRequire: a literal require of a builtin fails compilation;
// a computed one fails at run time.
func TestSandboxRequire(t *testing.T) {
	dir := t.TempDir()
	if _, err := Compile(writeFile(t, dir, "lit.cjs", `const fs = require("fs"); module.exports = () => ({ r: fs.readFileSync("/etc/passwd", "utf8") });`), "", Options{}); err == nil ||
		!strings.Contains(err.Error(), `import "fs" refused`) {
		t.Fatalf("Compile(require(\"fs\")) = %v", err)
	}
	p := compileSource(t, "dyn.cjs", `module.exports = (ctx) => { const m = ctx.payload.m; return { r: typeof require(m) }; };`, "", Options{})
	e := runErr(t, p, Input{Payload: map[string]any{"m": "fs"}}, KindThrow)
	if !strings.Contains(e.Message, "require") {
		t.Fatalf("message %q", e.Message)
	}
	p = compileSource(t, "imp.mjs", `export default async (ctx) => ({ r: typeof (await import(ctx.payload.m)) });`, "", Options{})
	runErr(t, p, Input{Payload: map[string]any{"m": "fs"}}, KindThrow)
}

// TestSandboxSourceMapComment: code cannot be generated from strings at
// run time, so no "//# sourceMappingURL=" comment can make the parser open
// a file (a FIFO would block the read forever; /dev/zero would exhaust
// memory), and a string nested deeply enough to overflow the parser's Go
// stack (which would kill the process) is never parsed.
func TestSandboxSourceMapComment(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "map.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	p := compileSource(t, "m.js", `export default (ctx) => {
  const out = {};
  const tries = { eval: () => eval("1 + 1\n//# sourceMappingURL=" + ctx.payload.path),
    fn: () => Function("return 3\n//# sourceMappingURL=" + ctx.payload.path)(),
    deep: () => Function("return " + "[".repeat(1e6))() };
  for (const [k, f] of Object.entries(tries)) { try { out[k] = f(); } catch (e) { out[k] = e.name; } }
  return out;
};`, "", Options{Timeout: hangBound})
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"path": fifo}})
	if err != nil || out["eval"] != "ReferenceError" || out["fn"] != "EvalError" || out["deep"] != "EvalError" {
		t.Fatalf("Run = %v, %v", out, err)
	}
	if _, err := os.Stat(fifo); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxCompileTimeSourceMap: a module cannot smuggle a source-map
// file reference into the bundle either.
func TestSandboxCompileTimeSourceMap(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "map.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Compile(writeFile(t, t.TempDir(), "m.js", "export default () => null;\n//# sourceMappingURL="+fifo+"\n"), "", Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Compile blocked reading a source map file")
	}
}

// TestModuleStateIsPerRuntime documents that globals a module sets live in
// its runtime, not across the pool, and that built-in prototypes a module
// patches stay patched only in its own runtime.
func TestModuleStateIsPerRuntime(t *testing.T) {
	a := compileSource(t, "a.js", `Array.prototype.evil = 1; globalThis.leak = "a"; export default () => ({ v: typeof [].evil });`, "", Options{})
	b := compileSource(t, "b.js", `export default () => ({ v: typeof [].evil, leak: typeof globalThis.leak });`, "", Options{})
	if out, err := a.Run(context.Background(), Input{}); err != nil || out["v"] != "number" {
		t.Fatalf("a = %v, %v", out, err)
	}
	if out, err := b.Run(context.Background(), Input{}); err != nil || out["v"] != "undefined" || out["leak"] != "undefined" {
		t.Fatalf("b sees a's changes: %v, %v", out, err)
	}
}
