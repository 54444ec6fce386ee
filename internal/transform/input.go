package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// Input is what the script sees as ctx.
type Input struct {
	Payload map[string]any    // decoded JSON object
	Headers map[string]string // lower-cased names
	Path    string            // the hook sub-path, e.g. "github"
	URL     *url.URL          // request URL: ctx.url.pathname, ctx.url.searchParams.get(k)/getAll/has, ctx.url.search, ctx.url.href
}

// preludeSource builds ctx inside the runtime. It returns the ctx factory
// (a closure, so nothing is added to the global scope) and the classes
// ctx.url exposes, which harden freezes. searchParams follows the
// URLSearchParams read API over the query pairs in request order.
const preludeSource = `(function () {
  "use strict";
  const encode = (s) => encodeURIComponent(s).replace(/%20/g, "+");
  class URLSearchParams {
    #pairs;
    constructor(pairs) { this.#pairs = pairs; }
    get size() { return this.#pairs.length; }
    get(name) { name = String(name); for (const p of this.#pairs) { if (p[0] === name) return p[1]; } return null; }
    getAll(name) { name = String(name); const out = []; for (const p of this.#pairs) { if (p[0] === name) out.push(p[1]); } return out; }
    has(name) { name = String(name); for (const p of this.#pairs) { if (p[0] === name) return true; } return false; }
    keys() { return this.#pairs.map((p) => p[0]).values(); }
    values() { return this.#pairs.map((p) => p[1]).values(); }
    entries() { return this.#pairs.map((p) => [p[0], p[1]]).values(); }
    forEach(fn, thisArg) { for (const p of this.#pairs) fn.call(thisArg, p[1], p[0], this); }
    toString() { return this.#pairs.map((p) => encode(p[0]) + "=" + encode(p[1])).join("&"); }
    [Symbol.iterator]() { return this.entries(); }
    get [Symbol.toStringTag]() { return "URLSearchParams"; }
  }
  class RequestURL {
    #pairs;
    #params;
    constructor(href, pathname, search, pairs) {
      this.href = href;
      this.pathname = pathname;
      this.search = search;
      this.#pairs = pairs;
    }
    get searchParams() { return (this.#params ??= new URLSearchParams(this.#pairs ?? [])); }
    toString() { return this.href; }
    toJSON() { return this.href; }
  }
  const makeCtx = function makeCtx(payload, headers, path, href, pathname, search, pairs) {
    return { payload, headers, path, url: new RequestURL(href, pathname, search, pairs) };
  };
  // eachView is what the reference gateway builds per forEach element,
  // {...payload, [key]: list}, without copying the payload: a proxy that
  // reads through to it, shows list under key, and keeps the element's own
  // top-level changes to itself (nested objects are shared, as with a
  // shallow copy).
  const eachView = function eachView(base, key, list) {
    const proto = Object.getPrototypeOf(base);
    const own = new Map([[key, { value: list, writable: true, enumerable: true, configurable: true }]]);
    const gone = new Set();
    const desc = (p) => own.has(p) ? own.get(p) : gone.has(p) ? undefined : Reflect.getOwnPropertyDescriptor(base, p);
    const define = (p, d) => { own.set(p, d); gone.delete(p); return true; };
    return new Proxy(base, {
      get(t, p, r) {
        const d = desc(p);
        if (d === undefined) return Reflect.get(proto, p, r);
        return "value" in d ? d.value : d.get === undefined ? undefined : Reflect.apply(d.get, r, []);
      },
      set(t, p, v, r) {
        const d = desc(p);
        if (d === undefined) return Reflect.set(proto, p, v, r);
        if (!("value" in d)) {
          if (d.set === undefined) return false;
          Reflect.apply(d.set, r, [v]);
          return true;
        }
        return d.writable && define(p, { value: v, writable: true, enumerable: d.enumerable, configurable: true });
      },
      has(t, p) { return desc(p) !== undefined || p in proto; },
      ownKeys() {
        const keys = Reflect.ownKeys(base).filter((k) => !gone.has(k) || own.has(k));
        for (const k of own.keys()) if (!keys.includes(k)) keys.push(k);
        return keys;
      },
      getOwnPropertyDescriptor(t, p) {
        const d = desc(p);
        return d === undefined ? undefined : Object.assign({}, d, { configurable: true });
      },
      defineProperty(t, p, d) {
        if (d.configurable === false) return false;
        const full = Object.assign({ value: undefined, writable: false, enumerable: false }, desc(p), d, { configurable: true });
        if ("get" in d || "set" in d) { delete full.value; delete full.writable; }
        else if ("value" in d || "writable" in d) { delete full.get; delete full.set; }
        return define(p, full);
      },
      deleteProperty(t, p) {
        own.delete(p);
        if (Reflect.getOwnPropertyDescriptor(base, p) !== undefined) gone.add(p);
        return true;
      },
      preventExtensions() { return false; },
      setPrototypeOf() { return false; },
    });
  };
  return [makeCtx, URLSearchParams, RequestURL, eachView];
})()`

// preludeProgram is compiled once; a goja.Program is immutable and may be
// run by many runtimes at once.
var preludeProgram = goja.MustCompile("caddyhook:prelude", preludeSource, true)

// ctxParts are the converted pieces of ctx, the arguments of makeCtx.
type ctxParts [7]goja.Value

// ctxValue converts in into a fresh JavaScript ctx object; a payload it
// cannot convert is an *Error of KindInput. Everything is
// copied into native JavaScript values, so a script can neither mutate the
// caller's maps nor race with other calls sharing them.
func (v *vm) ctxValue(in Input) (goja.Value, error) {
	parts, err := v.ctxParts(in)
	if err != nil {
		return nil, err
	}
	return v.makeCtx(goja.Undefined(), parts[:]...)
}

// ctxParts converts in into the arguments of makeCtx.
func (v *vm) ctxParts(in Input) (ctxParts, error) {
	payload, err := v.jsValue(in.Payload, 0)
	if errors.Is(err, errStopped) {
		return ctxParts{}, err
	}
	if err != nil {
		return ctxParts{}, newError(KindInput, err.Error())
	}
	headers := v.rt.NewObject()
	for _, k := range slices.Sorted(maps.Keys(in.Headers)) {
		_ = headers.DefineDataProperty(k, v.rt.ToValue(in.Headers[k]), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
	}
	var href, pathname, search string
	pairs := goja.Undefined()
	if u := in.URL; u != nil {
		href, pathname = u.String(), u.Path
		if u.RawQuery != "" {
			search = "?" + u.RawQuery
			kvs := queryPairs(u.RawQuery)
			items := make([]any, len(kvs))
			for i, kv := range kvs {
				items[i] = v.rt.NewArray(kv[0], kv[1])
			}
			pairs = v.rt.NewArray(items...)
		}
	}
	return ctxParts{payload, headers, v.rt.ToValue(in.Path), v.rt.ToValue(href), v.rt.ToValue(pathname), v.rt.ToValue(search), pairs}, nil
}

// errStopped ends a conversion the watchdog stopped; the call's stop
// reason replaces it.
var errStopped = errors.New("stopped")

// stopCheckEvery is how many converted values pass between two looks at
// the call's stop reason: the conversion is Go code, which the runtime's
// interrupt does not reach, and a padded payload can hold millions of
// values.
const stopCheckEvery = 1024

// jsValue converts a decoded-JSON Go value into a native JavaScript value.
// Object keys are defined as own data properties in sorted order, so a
// "__proto__" key is an ordinary property as with JSON.parse.
func (v *vm) jsValue(x any, depth int) (goja.Value, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("payload nested deeper than %d", maxNesting)
	}
	if v.converted++; v.converted%stopCheckEvery == 0 && v.guard.call != nil && v.guard.call.reason.Load() != reasonNone {
		return nil, errStopped
	}
	switch t := x.(type) {
	case nil:
		return goja.Null(), nil
	case string, bool, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return v.rt.ToValue(t), nil
	case json.Number:
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("payload holds a number that is not representable")
		}
		return v.rt.ToValue(f), nil
	case map[string]any:
		obj := v.rt.NewObject()
		for _, k := range slices.Sorted(maps.Keys(t)) {
			e, err := v.jsValue(t[k], depth+1)
			if err != nil {
				return nil, err
			}
			_ = obj.DefineDataProperty(k, e, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		}
		return obj, nil
	case []any:
		items := make([]any, len(t))
		for i, e := range t {
			je, err := v.jsValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			items[i] = je
		}
		return v.rt.NewArray(items...), nil
	case map[string]string:
		m := make(map[string]any, len(t))
		for k, s := range t {
			m[k] = s
		}
		return v.jsValue(m, depth)
	case []string:
		items := make([]any, len(t))
		for i, s := range t {
			items[i] = s
		}
		return v.jsValue(items, depth)
	default:
		return nil, fmt.Errorf("payload holds a value of unsupported type %T", x)
	}
}

// queryPairs splits a raw query into decoded key/value pairs, keeping
// request order and repeats (url.ParseQuery would lose the order).
// Undecodable escapes are kept as written.
func queryPairs(raw string) [][2]string {
	var out [][2]string
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, val, _ := strings.Cut(part, "=")
		out = append(out, [2]string{unescapeQuery(k), unescapeQuery(val)})
	}
	return out
}

// unescapeQuery decodes one form-encoded component, leaving it as is when
// it is not valid.
func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}
