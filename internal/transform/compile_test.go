package transform

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestModuleFormats runs one module per supported format and export style.
func TestModuleFormats(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		export string
		src    string
	}{
		{"ts default", "m.ts", "", `export default function (ctx: { path: string }): { text: string } { return { text: "ts:" + ctx.path }; }`},
		{"mts default arrow", "m.mts", "", `const f = (ctx: any) => ({ text: "mts:" + ctx.path }); export default f;`},
		{"js esm named transform", "m.js", "", `export function transform(ctx) { return { text: "js:" + ctx.path }; }`},
		{"mjs default wins over transform", "m.mjs", "", `export function transform() { return { text: "wrong" }; }
export default (ctx) => ({ text: "mjs:" + ctx.path });`},
		{"cjs module.exports = fn", "m.cjs", "", `module.exports = function (ctx) { return { text: "cjs:" + ctx.path }; };`},
		{"cjs module.exports = {transform}", "m.cjs", "", `module.exports = { transform: (ctx) => ({ text: "cjsobj:" + ctx.path }) };`},
		{"js commonjs exports.default", "m.js", "", `exports.default = (ctx) => ({ text: "cjsdef:" + ctx.path });`},
		{"named export option", "m.ts", "onPush", `export const onPush = (ctx: any) => ({ text: "named:" + ctx.path });
export default () => ({ text: "wrong" });`},
		{"cjs named export option", "m.cjs", "handle", `exports.handle = (ctx) => ({ text: "cjsnamed:" + ctx.path });`},
		{"modern syntax", "m.js", "", `
class Counter { #n = 0; static zero = 0; static { Counter.ready = true; } inc() { return ++this.#n; } }
export default async function (ctx) {
  const c = new Counter(); c.inc();
  const o = { a: { b: null } };
  let z = o?.a?.b ?? 5; z ||= 1; z &&= 2;
  const { a, ...rest } = { a: 1, b: 2 };
  async function* gen() { yield 1; yield 2; }
  let s = 0; for await (const v of gen()) s += v;
  const big = (2n ** 64n).toString();
  const g = /(?<y>\d{4})/u.exec("in 2024").groups.y;
  return { text: ["modern", ctx.path, c.inc(), z, rest.b, s, big, g, [1, [2, [3]]].flat(Infinity).join(""), Counter.ready, 1_000].join(":") };
}`},
	}
	want := map[string]string{
		"ts default": "ts:p", "mts default arrow": "mts:p", "js esm named transform": "js:p",
		"mjs default wins over transform": "mjs:p", "cjs module.exports = fn": "cjs:p",
		"cjs module.exports = {transform}": "cjsobj:p", "js commonjs exports.default": "cjsdef:p",
		"named export option": "named:p", "cjs named export option": "cjsnamed:p",
		"modern syntax": "modern:p:2:2:2:3:18446744073709551616:2024:123:true:1000",
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, tc.file, tc.src, tc.export, Options{})
			out, err := p.Run(context.Background(), Input{Path: "p"})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := out["text"]; got != want[tc.name] {
				t.Fatalf("text = %v, want %q", got, want[tc.name])
			}
		})
	}
}

// TestTypeScriptFeatures covers interfaces, enums, generics, namespaces,
// abstract classes, parameter properties, satisfies and decorators.
func TestTypeScriptFeatures(t *testing.T) {
	src := `
interface Event<T> { type: string; data: T }
enum Level { Low = 1, High = 10 }
const enum Flag { A = "a", B = "b" }
namespace Util { export const twice = (n: number): number => n * 2; }
type Pair<A, B> = [A, B];
function first<T extends { length: number }>(xs: T[]): T | undefined { return xs[0]; }
function pair<A, B>(a: A, b: B): Pair<A, B> { return [a, b]; }
abstract class Base<T> { constructor(protected readonly value: T) {} abstract show(): string; }
class Box extends Base<number> { show(): string { return "box" + this.value; } }
function logged<T extends (...a: any[]) => string>(f: T, _ctx: ClassMethodDecoratorContext): T { return function (this: unknown, ...a: any[]) { return "@" + f.apply(this, a); } as T; }
class Svc { @logged hello(n: string) { return "hi " + n; } }
const cfg = { level: Level.High } satisfies { level: Level };
export default function (ctx: { payload: Event<{ n: number }> }): Record<string, unknown> {
  const p = pair(Level[Level.Low], Flag.B);
  return {
    kind: "wake",
    text: [p.join("/"), Util.twice(ctx.payload.data.n), first(["x", "y"]), new Box(3).show(), cfg.level, new Svc().hello("ts")].join(" "),
  };
}`
	p := compileSource(t, "feat.ts", src, "", Options{})
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"type": "x", "data": map[string]any{"n": 21.0}}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := "Low/b 42 x box3 10 @hi ts"; out["text"] != want {
		t.Fatalf("text = %q, want %q", out["text"], want)
	}
}

// TestRelativeImports bundles a module that imports TS, JS, CJS, JSON and
// a directory index, through a sibling directory and a symlink that stays
// inside the root.
func TestRelativeImports(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "lib/format.ts", `export const fmt = <T,>(label: string, v: T): string => label + "=" + String(v);`)
	writeFile(t, dir, "lib/index.js", `export { fmt } from "./format"; export const answer = 42;`)
	writeFile(t, dir, "lib/legacy.cjs", `module.exports = { shout: (s) => s.toUpperCase() };`)
	writeFile(t, dir, "data/config.json", `{"prefix": "cfg"}`)
	writeFile(t, dir, "hooks/main.ts", `
import { fmt, answer } from "../lib";
import legacy from "../lib/legacy.cjs";
import config from "../data/config.json";
import { fmt as viaLink } from "../alias/format";
export default (ctx: any) => ({ text: [fmt(config.prefix, answer), legacy.shout(ctx.path), viaLink("l", 1)].join(" ") });`)
	if err := os.Symlink("lib", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(filepath.Join(dir, "hooks/main.ts"), "", Options{Root: dir})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	out, err := p.Run(context.Background(), Input{Path: "imp"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := "cfg=42 IMP l=1"; out["text"] != want {
		t.Fatalf("text = %q, want %q", out["text"], want)
	}
	// entry, index, format (also reached through the alias), legacy, config
	if len(p.inputs) != 5 {
		t.Fatalf("bundled %d files, want 5", len(p.inputs))
	}
}

// TestCompileRefusals: forbidden imports, syntax errors and bad exports
// fail at compile time with a message naming the file and line.
func TestCompileRefusals(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "evil.js", `export const x = 1;`)
	tests := []struct {
		name   string
		files  map[string]string
		links  map[string]string // name -> target (relative to root, may escape)
		export string
		want   []string // substrings of the error
	}{
		{name: "node builtin", files: map[string]string{"m.js": "import fs from \"fs\";\nexport default () => fs;"}, want: []string{"m.js:1:", `import "fs" refused`}},
		{name: "node: scheme", files: map[string]string{"m.js": `import fs from "node:fs"; export default () => fs;`}, want: []string{`"node:fs" refused`}},
		{name: "require builtin", files: map[string]string{"m.cjs": "\n\nconst fs = require('fs');\nmodule.exports = () => fs;"}, want: []string{"m.cjs:3:", `import "fs" refused`}},
		{name: "package", files: map[string]string{"m.ts": `import _ from "lodash"; export default () => _;`}, want: []string{`"lodash" refused`}},
		{name: "absolute import", files: map[string]string{"m.ts": `import { x } from "` + filepath.Join(outside, "evil.js") + `"; export default () => x;`}, want: []string{"refused"}},
		{name: "parent escape", files: map[string]string{"m.ts": `import { x } from "../../../../../../../../etc/passwd"; export default () => x;`}, want: []string{"outside the transforms dir"}},
		{name: "symlink file escape", files: map[string]string{"m.ts": `import { x } from "./evil.js"; export default () => x;`}, links: map[string]string{"evil.js": filepath.Join(outside, "evil.js")}, want: []string{"outside the transforms dir"}},
		{name: "symlink dir escape", files: map[string]string{"m.ts": `import { x } from "./out/evil.js"; export default () => x;`}, links: map[string]string{"out": outside}, want: []string{"outside the transforms dir"}},
		{name: "missing import", files: map[string]string{"m.ts": `import { x } from "./nope"; export default () => x;`}, want: []string{`"./nope": no such file`}},
		{name: "url import", files: map[string]string{"m.ts": `import x from "https://example.com/x.js"; export default () => x;`}, want: []string{"refused"}},
		{name: "syntax error", files: map[string]string{"m.ts": "export default () => {\n  let x = ;\n};"}, want: []string{"m.ts:2:11", "Unexpected"}},
		{name: "syntax error in import", files: map[string]string{"m.ts": `import { y } from "./lib"; export default () => y;`, "lib.ts": "export const y = (;\n"}, want: []string{"lib.ts:1:", "Unexpected"}},
		{name: "type annotation in js", files: map[string]string{"m.js": "export default (x: number) => x;"}, want: []string{"m.js:1:"}},
		{name: "top-level await", files: map[string]string{"m.mjs": "await null;\nexport default () => null;"}, want: []string{"m.mjs:1:", "await"}},
		{name: "no export", files: map[string]string{"m.js": `export const other = 1;`}, want: []string{"no default or transform export", "other"}},
		{name: "missing named export", files: map[string]string{"m.js": `export default () => null;`}, export: "nope", want: []string{`no export "nope"`, "default"}},
		{name: "export not a function", files: map[string]string{"m.js": `export const cfg = { a: 1 }; export default () => null;`}, export: "cfg", want: []string{`export "cfg" is an object, not a function`}},
		{name: "default not a function", files: map[string]string{"m.js": `export default 42;`}, want: []string{"no default or transform export"}},
		{name: "top level throws", files: map[string]string{"m.js": "const x = 1;\nthrow new Error(\"boom at load\");\nexport default () => null;"}, want: []string{"loading", "boom at load", "m.js:2"}},
		{name: "top level loops", files: map[string]string{"m.js": `for (;;) {} export default () => null;`}, want: []string{"loading", "time budget"}},
		{name: "unsupported extension", files: map[string]string{"m.jsx": `export default () => null;`}, want: []string{"unsupported extension"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var entry string
			for name, src := range tc.files {
				path := writeFile(t, dir, name, src)
				if strings.HasPrefix(name, "m.") {
					entry = path
				}
			}
			for name, target := range tc.links {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			// a short budget only where the budget is what refuses
			budget := hangBound
			if slices.Contains(tc.want, "time budget") {
				budget = 50 * time.Millisecond
			}
			p, err := Compile(entry, tc.export, Options{Timeout: budget})
			if err == nil {
				t.Fatalf("Compile succeeded (%v), want error", p.File())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestCompileOutsideRoot: the entry itself must be inside Options.Root.
func TestCompileOutsideRoot(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	file := writeFile(t, other, "m.js", `export default () => null;`)
	if _, err := Compile(file, "", Options{Root: root}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Compile outside root: %v, want an error naming it outside", err)
	}
	if err := os.Symlink(file, filepath.Join(root, "link.js")); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(filepath.Join(root, "link.js"), "", Options{Root: root}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("Compile through escaping symlink: %v, want an error", err)
	}
}

// TestSourceMappedErrors: a runtime error names the original file and
// line, through imports.
func TestSourceMappedErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "lib/check.ts", "interface X { a: number }\n\nexport function check(x: X): number {\n  if (x.a > 1) {\n    throw new RangeError(\"value too big\");\n  }\n  return x.a;\n}\n")
	file := writeFile(t, dir, "main.ts", "import { check } from \"./lib/check\";\nexport default (ctx: any) => ({ n: check(ctx.payload) });\n")
	p, err := Compile(file, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := runErr(t, p, Input{Payload: map[string]any{"a": 5.0}}, KindThrow)
	if want := "RangeError: value too big (at lib/check.ts:5:"; !strings.HasPrefix(e.Message, want) {
		t.Fatalf("message %q, want prefix %q", e.Message, want)
	}
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{"a": 1.0}})
	if err != nil || !reflect.DeepEqual(out, map[string]any{"n": 1.0}) {
		t.Fatalf("Run = %v, %v", out, err)
	}
}
