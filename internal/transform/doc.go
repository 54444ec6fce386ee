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
// where searchParams offers the URLSearchParams read API. As in the
// reference gateway, it returns null to skip, or an object whose own
// enumerable properties override the mapping's fields; undefined, a
// primitive, an array or a function overrides nothing. A returned promise
// is awaited.
//
// Each call runs on a pooled, sandboxed runtime: pure ECMAScript only (no
// require, process, console, timers, fetch, binary buffers, eval or
// Function constructors), a per-call time budget of the call thread's CPU
// time (watchdog.go) enforced with the runtime's interrupt, and a memory guard made of size-checked built-ins
// (guard.go, textsize.go), bounded BigInt arithmetic (bigint.go), a
// heap-allocation watchdog (watchdog.go) and a capped result conversion
// (result.go). Work the interrupt cannot reach is bounded too:
// built-in iterators (spread, destructuring, Array.from) stop once the
// call is stopped, object spread and rest are compiled to script loops,
// matches of the backtracking regexp engine time out (regexp.go), and
// patterns compiled at run time are size-checked. Should anything still
// keep a worker busy, Run returns one time budget after stopping it and the
// runtime's slot is given back at once (pool.go). Once the module is
// loaded the realm is frozen (harden.go), so nothing a call does to the
// built-ins reaches the next call. Error messages are sanitized: no
// payload string, key or number reaches them (errors.go).
//
// Paths are confined: ResolveDir and ResolveModule refuse anything that
// leaves the transforms directory, whether by "..", percent-encoding or
// symbolic links.
package transform
