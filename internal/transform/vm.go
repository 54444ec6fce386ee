package transform

import (
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/dop251/goja"
)

// vm is one sandboxed runtime with the module loaded. It is used by one
// call at a time.
type vm struct {
	rt       *goja.Runtime
	guard    *guard
	fn       goja.Callable // the selected export
	makeCtx  goja.Callable // builds ctx, from the prelude
	eachView goja.Callable // the payload of one forEach element, from the prelude
	harden   goja.Callable // freezes the realm once the module is loaded
	ready    bool

	converted int // payload values converted, for stop checks (input.go)

	// jobs feeds the runtime's own worker goroutine (see serve).
	jobs chan func() bool

	// trampoline runs pending inside the runtime so that script code it
	// triggers from Go (getters, toString, toJSON, proxies) can throw or
	// be interrupted without panicking through Go code.
	trampoline goja.Callable
	pending    func() error
	pendingErr error
}

// newVM returns a sandboxed runtime with nothing loaded yet; load runs
// script code and so must happen under the watchdog.
func newVM(opts Options) (*vm, error) {
	rt, g, harden, err := newSandbox(opts)
	if err != nil {
		return nil, err
	}
	v := &vm{rt: rt, guard: g, harden: harden, jobs: make(chan func() bool)}
	v.trampoline, _ = goja.AssertFunction(rt.ToValue(func(goja.FunctionCall) goja.Value {
		v.pendingErr = v.pending()
		return goja.Undefined()
	}))
	return v, nil
}

// serve is the runtime's worker goroutine: it runs the calls handed to
// the runtime one at a time and ends when a call reports the runtime must
// not be reused, or when the pool closes the channel. A long-lived worker
// keeps its grown stack, which a goroutine per call would have to grow
// again on every call.
func (v *vm) serve() {
	for job := range v.jobs {
		if !job() {
			return
		}
	}
}

// protect runs f through the trampoline: a script exception or interrupt
// raised while f touches script values comes back as an error.
func (v *vm) protect(f func() error) error {
	v.pending, v.pendingErr = f, nil
	_, err := v.trampoline(goja.Undefined())
	ferr := v.pendingErr
	v.pending, v.pendingErr = nil, nil
	if err != nil {
		return err
	}
	return ferr
}

// load runs the prelude and the module's top level, selects the export
// and freezes the realm (harden.go). A module that cannot make BigInts
// (bigint is false) runs without the BigInt function (bigint.go).
func (v *vm) load(prog *goja.Program, export string, bigint bool) error {
	if !bigint {
		if err := v.rt.GlobalObject().Delete("BigInt"); err != nil {
			return err
		}
	}
	prelude, err := v.rt.RunProgram(preludeProgram)
	if err != nil {
		return err
	}
	parts := prelude.ToObject(v.rt)
	v.makeCtx, _ = goja.AssertFunction(parts.Get("0"))
	v.eachView, _ = goja.AssertFunction(parts.Get("3"))
	wrapper, err := v.rt.RunProgram(prog)
	if err != nil {
		return err
	}
	factory, ok := goja.AssertFunction(wrapper)
	if !ok {
		return fmt.Errorf("bundle did not evaluate to a function")
	}
	exports, err := factory(goja.Undefined(), v.guard.bigintOps)
	if err != nil {
		return err
	}
	v.fn, err = pickExport(v.rt, exports, export)
	if err != nil {
		return err
	}
	// the prelude's classes are reachable from every ctx
	if _, err := v.harden(goja.Undefined(), parts.Get("1"), parts.Get("2"), v.guard.bigintOps); err != nil {
		return err
	}
	v.ready = true
	return nil
}

// exportError is a module that does not export a usable function.
type exportError struct{ msg string }

func (e *exportError) Error() string { return e.msg }

// pickExport selects the function to call: the named export, else the
// module itself when module.exports is a function, else "default", else
// "transform".
func pickExport(rt *goja.Runtime, exports goja.Value, name string) (goja.Callable, error) {
	if name == "" {
		if fn, ok := goja.AssertFunction(exports); ok {
			return fn, nil
		}
	}
	obj, ok := exports.(*goja.Object)
	if !ok {
		return nil, &exportError{fmt.Sprintf("module exports %s, not an object or function", typeOf(exports))}
	}
	names := []string{name}
	if name == "" {
		names = []string{"default", "transform"}
	}
	for _, n := range names {
		val := obj.Get(n)
		if fn, ok := goja.AssertFunction(val); ok {
			return fn, nil
		}
		if name != "" && val != nil && !goja.IsUndefined(val) {
			return nil, &exportError{fmt.Sprintf("export %q is %s, not a function", n, typeOf(val))}
		}
	}
	have := obj.Keys()
	sort.Strings(have)
	list := "none"
	if len(have) > 0 {
		list = strings.Join(have, ", ")
	}
	if name != "" {
		return nil, &exportError{fmt.Sprintf("no export %q (exports: %s)", name, list)}
	}
	return nil, &exportError{fmt.Sprintf("no default or transform export, and module.exports is not a function (exports: %s)", list)}
}

// typeOf names a value's JavaScript type for messages.
func typeOf(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		if _, fn := goja.AssertFunction(o); fn {
			return "a function"
		}
		if o.ClassName() == "Array" {
			return "an array"
		}
		return "an object"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "a symbol"
	}
	switch v.Export().(type) {
	case *big.Int:
		return "a bigint"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	}
	return "a value"
}
