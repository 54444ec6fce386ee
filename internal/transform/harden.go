package transform

import (
	"fmt"

	"github.com/dop251/goja"
)

// A pooled runtime serves many requests, so nothing a call does to the
// realm may outlive the call: a naive deep merge of a payload carrying
// "__proto__" would otherwise put an attacker's properties on
// Object.prototype for every later request that runtime serves. Two
// steps close the realm:
//
//   - confine, on a fresh runtime before the module loads, refuses code
//     generation from strings (eval and the Function, GeneratorFunction
//     and AsyncFunction constructors throw an EvalError, as under Node's
//     --disallow-code-generation-from-strings: goja's parser recurses in
//     Go and a deeply nested string passed to eval overflows the Go
//     stack, which kills the process) and puts a checked RegExp
//     constructor in place of the native one (see checkPattern);
//   - harden, once the module is loaded, freezes every object reachable
//     from the global object and the built-in iterator and function
//     prototypes (the module's own top-level changes to built-ins are
//     kept and frozen with them). Data properties that ordinary code
//     commonly shadows by assignment (Object.prototype's methods, an
//     error's name and message, toString, constructor) become accessors
//     whose setter defines the property on the receiver, so that
//     `this.name = "MyError"` keeps working on a frozen Error.prototype.
//
// What stays mutable is the module's own state (its top-level variables
// and objects), which persists per runtime as it persists for the single
// module instance of the reference gateway.
const confineSource = `(function (checkPattern) {
  "use strict";
  const G = globalThis;
  const { defineProperty, getOwnPropertyDescriptor, getPrototypeOf, freeze } = Object;
  const { ownKeys, construct, apply } = Reflect;

  const noCodeGeneration = () => {
    throw new EvalError("code generation from strings is disabled in transforms");
  };
  function Function() { noCodeGeneration(); }
  function GeneratorFunction() { noCodeGeneration(); }
  function AsyncFunction() { noCodeGeneration(); }
  const replaceConstructor = (proto, ctor) => {
    defineProperty(ctor, "prototype", { value: proto, writable: false, enumerable: false, configurable: false });
    defineProperty(proto, "constructor", { value: ctor, writable: true, enumerable: false, configurable: true });
  };
  replaceConstructor(G.Function.prototype, Function);
  replaceConstructor(getPrototypeOf(function* () {}), GeneratorFunction);
  replaceConstructor(getPrototypeOf(async function () {}), AsyncFunction);
  defineProperty(G, "Function", { value: Function, writable: true, enumerable: false, configurable: true });
  delete G.eval;

  const NativeRegExp = G.RegExp, RegExpProto = NativeRegExp.prototype, nativeCompile = RegExpProto.compile;
  function RegExp(pattern, flags) {
    if (new.target === undefined && flags === undefined && pattern !== null && typeof pattern === "object" &&
        pattern[Symbol.match] && pattern.constructor === RegExp) {
      return pattern;
    }
    return construct(NativeRegExp, checkPattern(pattern, flags), new.target === undefined ? RegExp : new.target);
  }
  for (const k of ownKeys(NativeRegExp)) {
    if (k !== "prototype" && k !== "length" && k !== "name") {
      defineProperty(RegExp, k, getOwnPropertyDescriptor(NativeRegExp, k));
    }
  }
  replaceConstructor(RegExpProto, RegExp);
  defineProperty(RegExpProto, "compile", {
    value: function compile(pattern, flags) { return apply(nativeCompile, this, checkPattern(pattern, flags)); },
    writable: true, enumerable: false, configurable: true,
  });
  defineProperty(G, "RegExp", { value: RegExp, writable: true, enumerable: false, configurable: true });

  return function harden(...extra) {
    const tame = (o, k) => {
      const d = getOwnPropertyDescriptor(o, k);
      if (d === undefined || !("value" in d) || !d.configurable) {
        return;
      }
      const value = d.value;
      defineProperty(o, k, {
        get: function () { return value; },
        set: function (v) {
          if (this === o) {
            throw new TypeError("Cannot assign to read only property '" + String(k) + "' of a built-in object");
          }
          defineProperty(this, k, { value: v, writable: true, enumerable: true, configurable: true });
        },
        enumerable: d.enumerable, configurable: false,
      });
    };
    for (const k of ownKeys(Object.prototype)) {
      tame(Object.prototype, k);
    }
    for (const k of ["constructor", "bind", "toString", "call", "apply"]) {
      tame(Function.prototype, k);
    }
    for (const E of [Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError, G.AggregateError]) {
      if (E !== undefined) {
        for (const k of ["constructor", "message", "name", "toString"]) {
          tame(E.prototype, k);
        }
      }
    }
    tame(Array.prototype, "toString");
    tame(Promise.prototype, "constructor");
    const iteratorProto = getPrototypeOf(getPrototypeOf([][Symbol.iterator]()));
    for (const k of ["constructor", "toString", Symbol.toStringTag]) {
      tame(iteratorProto, k);
    }

    // A plain stack and index loops: the guarded array methods and
    // iterators would cost a native call per step.
    const seen = new Set();
    const todo = [G, NativeRegExp, getPrototypeOf(function* () {}), getPrototypeOf((function* () {})()),
      getPrototypeOf(async function () {}), getPrototypeOf([][Symbol.iterator]()), getPrototypeOf(""[Symbol.iterator]()),
      getPrototypeOf(new Map()[Symbol.iterator]()), getPrototypeOf(new Set()[Symbol.iterator]()),
      getPrototypeOf(/x/[Symbol.matchAll]("")), ...extra];
    let n = todo.length;
    while (n > 0) {
      const o = todo[--n];
      if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) {
        continue;
      }
      seen.add(o);
      const keys = ownKeys(o);
      if (typeof o === "function" && keys.length === 2 && keys[0] === "length" && keys[1] === "name") {
        continue; // a method: nothing reachable but Function.prototype
      }
      todo[n++] = getPrototypeOf(o);
      for (let i = 0; i < keys.length; i++) {
        const d = getOwnPropertyDescriptor(o, keys[i]);
        if (d !== undefined) {
          todo[n++] = d.value;
          todo[n++] = d.get;
          todo[n++] = d.set;
        }
      }
    }
    seen.forEach(freeze);
  };
})`

// confineProgram is compiled once and run on every new runtime.
var confineProgram = goja.MustCompile("caddyhook:confine", confineSource, true)

// confine applies the first step to a fresh runtime and returns the
// second, which the caller runs once the module is loaded.
func confine(rt *goja.Runtime, g *guard) (goja.Callable, error) {
	v, err := rt.RunProgram(confineProgram)
	if err != nil {
		return nil, fmt.Errorf("transform sandbox: %w", err)
	}
	fn, _ := goja.AssertFunction(v)
	h, err := fn(goja.Undefined(), rt.ToValue(g.checkPattern))
	if err != nil {
		return nil, fmt.Errorf("transform sandbox: %w", err)
	}
	harden, ok := goja.AssertFunction(h)
	if !ok {
		return nil, fmt.Errorf("transform sandbox: confine did not return a function")
	}
	return harden, nil
}
