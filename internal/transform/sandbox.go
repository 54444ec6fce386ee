package transform

import (
	"fmt"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// maxCallStack bounds JavaScript recursion depth; beyond it the script
// gets a RangeError instead of growing the Go stack without limit.
const maxCallStack = 4096

// removedGlobals are globals goja provides that a JSON-to-action transform
// does not need: GoError is not ECMAScript, and binary buffers can
// allocate gigabytes in one constructor call and cannot cross the JSON
// boundary anyway.
var removedGlobals = []string{
	"GoError",
	"ArrayBuffer", "SharedArrayBuffer", "DataView",
	"Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
	"Int32Array", "Uint32Array", "Float32Array", "Float64Array",
	"BigInt64Array", "BigUint64Array",
}

// newSandbox returns a fresh runtime holding only pure ECMAScript built-ins
// (no require, process, console, timers or fetch exist in goja to begin
// with), with bounded recursion, guarded built-ins, no code generation
// from strings and a checked RegExp constructor (harden.go), and source
// maps disabled for code parsed at run time. It also returns the function
// that freezes the realm once the module is loaded.
func newSandbox(opts Options) (*goja.Runtime, *guard, goja.Callable, error) {
	rt := goja.New()
	rt.SetParserOptions(parser.WithDisableSourceMaps)
	rt.SetMaxCallStackSize(maxCallStack)
	global := rt.GlobalObject()
	for _, name := range removedGlobals {
		_ = global.Delete(name)
	}
	g := &guard{rt: rt, maxChars: opts.MaxBytes, maxElems: opts.maxElems(), maxBigIntBits: opts.maxBigIntBits()}
	g.install()
	if err := g.installBigInt(); err != nil {
		return nil, nil, nil, fmt.Errorf("transform sandbox: %w", err)
	}
	harden, err := confine(rt, g)
	if err != nil {
		return nil, nil, nil, err
	}
	g.regExpCtor = rt.Get("RegExp").ToObject(rt) // the checked one, before any module code runs
	return rt, g, harden, nil
}
