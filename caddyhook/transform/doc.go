// Package transform runs operator-supplied JavaScript and TypeScript
// transform modules for caddyhook mappings.
//
// A module (.ts, .mts, .js, .mjs or .cjs) is bundled once by esbuild:
// TypeScript and syntax goja lacks are lowered, relative imports of files
// inside the transforms directory are inlined (JSON included), and
// anything else (packages, node builtins, absolute paths, URLs) fails the
// build with the importing file and line. TypeScript is transpiled, not
// type-checked. The bundle is compiled once for goja; Cache recompiles it
// when the module or any bundled file changes.
//
// The exported function (named by the export option, else the module
// itself when module.exports is a function, else "default", else
// "transform") is called with
//
//	ctx = { payload, headers, path, url: { href, pathname, search, searchParams } }
//
// where searchParams offers the URLSearchParams read API. It returns null
// or undefined to skip, or an object (a partial action); a returned
// promise is awaited. The object is converted with JSON semantics.
//
// Each call runs on a pooled, sandboxed runtime: pure ECMAScript only (no
// require, process, console, timers, fetch or binary buffers), a per-call
// time budget enforced with the runtime's interrupt, and a memory guard
// made of size-checked built-ins (guard.go), a heap-allocation watchdog
// (watchdog.go) and a capped result conversion (result.go). Should a
// built-in the interrupt cannot reach keep running, Run still returns
// after twice the time budget.
//
// Paths are confined: ResolveDir and ResolveModule refuse anything that
// leaves the transforms directory, whether by "..", percent-encoding or
// symbolic links.
package transform
