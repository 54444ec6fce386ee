package transform

import (
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/dop251/goja"
)

// Size charges of the result conversion, in bytes.
const (
	scalarCost = 8  // a number, boolean or null
	entryCost  = 16 // per object property or array element, beyond its content
)

// exporter converts a script result into plain Go values with JSON
// semantics, charging every string, key and value against a byte budget
// as it goes, so shared or huge structures are refused before they are
// copied. It runs while the call is still supervised: getters and toJSON
// methods it triggers are script code under the same time budget.
type exporter struct {
	rt     *goja.Runtime
	budget int64
	used   int64
}

// resultMemoryError marks a result over the size cap.
type resultMemoryError struct{ limit int64 }

func (e *resultMemoryError) Error() string {
	return fmt.Sprintf("memory limit: result larger than %d bytes", e.limit)
}

// top converts the value the export produced (after awaiting it) the way
// the reference gateway reads it: null means skip (nil map, nil error);
// an object's own enumerable properties are the overrides (its toJSON is
// not consulted, as the gateway reads the fields directly); anything else
// (undefined, a primitive, an array, a function) overrides nothing, which
// is an empty, non-nil map.
func (e *exporter) top(v goja.Value) (map[string]any, error) {
	if v != nil && goja.IsNull(v) {
		return nil, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() == "Array" {
		return map[string]any{}, nil
	}
	if _, fn := goja.AssertFunction(obj); fn {
		return map[string]any{}, nil
	}
	return e.properties(obj, 0)
}

// charge adds n bytes and fails past the budget.
func (e *exporter) charge(n int) error {
	e.used += int64(n)
	if e.used > e.budget {
		return &resultMemoryError{limit: e.budget}
	}
	return nil
}

// value converts one value; omit reports undefined, functions and symbols,
// which JSON leaves out of objects (and turns into null in arrays).
func (e *exporter) value(v goja.Value, depth int) (out any, omit bool, err error) {
	if depth > maxNesting {
		return nil, false, newError(KindResult, fmt.Sprintf("result nested deeper than %d (or circular)", maxNesting))
	}
	switch {
	case v == nil || goja.IsUndefined(v):
		return nil, true, nil
	case goja.IsNull(v):
		return nil, false, e.charge(scalarCost)
	}
	switch t := v.(type) {
	case *goja.Symbol:
		return nil, true, nil
	case goja.String:
		s := t.String()
		return s, false, e.charge(len(s))
	case *goja.Object:
		return e.object(t, depth)
	}
	switch x := v.Export().(type) {
	case bool:
		return x, false, e.charge(scalarCost)
	case int64:
		return float64(x), false, e.charge(scalarCost)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, e.charge(scalarCost)
		}
		return x, false, e.charge(scalarCost)
	case *big.Int:
		return nil, false, newError(KindResult, "result holds a BigInt, which JSON cannot represent")
	default:
		return nil, false, newError(KindResult, "result holds an unsupported value")
	}
}

// object converts arrays, objects with toJSON (such as Date) and plain
// objects; functions are omitted.
func (e *exporter) object(o *goja.Object, depth int) (any, bool, error) {
	if _, fn := goja.AssertFunction(o); fn {
		return nil, true, nil
	}
	if toJSON, ok := goja.AssertFunction(o.Get("toJSON")); ok {
		r, err := toJSON(o)
		if err != nil {
			return nil, false, err
		}
		if ro, isObj := r.(*goja.Object); isObj && ro == o {
			return nil, false, newError(KindResult, "toJSON returned its own object")
		}
		return e.value(r, depth+1)
	}
	switch o.ClassName() {
	case "Array":
		n := toLength(o.Get("length"))
		if err := e.charge(int(math.Min(n, float64(e.budget+1))) * entryCost); err != nil {
			return nil, false, err
		}
		arr := make([]any, int(n))
		for i := range arr {
			ev, omit, err := e.value(o.Get(strconv.Itoa(i)), depth+1)
			if err != nil {
				return nil, false, err
			}
			if !omit {
				arr[i] = ev
			}
		}
		return arr, false, nil
	case "String":
		return e.value(o.ToString(), depth)
	case "Number":
		return e.value(o.ToNumber(), depth)
	case "Boolean":
		if b, ok := o.Export().(bool); ok {
			return b, false, e.charge(scalarCost)
		}
	}
	m, err := e.properties(o, depth)
	return m, false, err
}

// properties converts o's own enumerable properties.
func (e *exporter) properties(o *goja.Object, depth int) (map[string]any, error) {
	keys := o.Keys()
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		ev, omit, err := e.value(o.Get(k), depth+1)
		if err != nil {
			return nil, err
		}
		if omit {
			continue
		}
		if err := e.charge(len(k) + entryCost); err != nil {
			return nil, err
		}
		m[k] = ev
	}
	return m, nil
}
