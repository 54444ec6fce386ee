package tmpl

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// appendCEL renders a CEL result like the equivalent reference value. At
// the top level strings are raw and null is empty; nested (inside a list
// or map) values are JSON. An unrenderable value is an *EvalError, and so
// is a list or map built by the expression whose rendering passes limit
// bytes of dst (a list of a million references to one long payload
// string is small in memory but not when rendered). Decoded payload data
// renders whole: the body limit bounds it, and strings the expression
// built are bounded by the output bound of the calls that built them.
func appendCEL(dst []byte, v ref.Val, nested bool, limit int) ([]byte, error) {
	switch x := v.(type) {
	case types.String:
		if nested {
			return appendJSONString(dst, string(x)), nil
		}
		return append(dst, x...), nil
	case types.Int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case types.Uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case types.Double:
		if nested {
			return appendJSONNumber(dst, float64(x)), nil
		}
		return appendJSNumber(dst, float64(x)), nil
	case types.Bool:
		return strconv.AppendBool(dst, bool(x)), nil
	case types.Null:
		if nested {
			return append(dst, "null"...), nil
		}
		return dst, nil
	case types.Bytes:
		return appendMaybeQuoted(dst, nested, func(b []byte) []byte {
			return base64.StdEncoding.AppendEncode(b, x)
		}), nil
	case types.Timestamp:
		return appendMaybeQuoted(dst, nested, func(b []byte) []byte {
			return x.Time.UTC().AppendFormat(b, isoMillis)
		}), nil
	case types.Duration:
		s, ok := x.ConvertToType(types.StringType).(types.String)
		if !ok {
			return nil, resultTypeError(v)
		}
		return appendCEL(dst, s, nested, limit)
	case *types.Optional:
		if !x.HasValue() {
			return appendCEL(dst, types.NullValue, nested, limit)
		}
		return appendCEL(dst, x.GetValue(), nested, limit)
	case traits.Lister:
		return appendCELList(dst, x, limit)
	case traits.Mapper:
		return appendCELMap(dst, x, limit)
	}
	return nil, resultTypeError(v)
}

// appendMaybeQuoted appends what fn writes, JSON-quoted when nested. fn
// writes only characters that need no escaping.
func appendMaybeQuoted(dst []byte, nested bool, fn func([]byte) []byte) []byte {
	if !nested {
		return fn(dst)
	}
	return append(fn(append(dst, '"')), '"')
}

// appendCELList appends a CEL list as a JSON array. A list that wraps
// decoded JSON is written directly; any other list stops at limit.
func appendCELList(dst []byte, l traits.Lister, limit int) ([]byte, error) {
	if native, ok := l.Value().([]any); ok {
		return appendJSON(dst, native), nil
	}
	dst = append(dst, '[')
	n, _ := l.Size().(types.Int)
	for i := range n {
		if len(dst) > limit {
			return nil, &EvalError{Kind: ErrOutputLimit}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendCEL(dst, l.Get(i), true, limit); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// celEntry is one map entry with its key rendered.
type celEntry struct {
	key string
	val ref.Val
}

// appendCELMap appends a CEL map as a JSON object with sorted keys; keys of
// any type are rendered as their top-level text. A map that wraps decoded
// JSON is written directly; any other map stops at limit.
func appendCELMap(dst []byte, m traits.Mapper, limit int) ([]byte, error) {
	switch native := m.Value().(type) {
	case map[string]any:
		return appendJSON(dst, native), nil
	case map[string]string:
		return appendJSON(dst, native), nil
	}
	var entries []celEntry
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		key, err := appendCEL(nil, k, false, limit)
		if err != nil {
			return nil, err
		}
		entries = append(entries, celEntry{key: string(key), val: m.Get(k)})
	}
	slices.SortFunc(entries, func(a, b celEntry) int { return cmp.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, e := range entries {
		if len(dst) > limit {
			return nil, &EvalError{Kind: ErrOutputLimit}
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, e.key)
		dst = append(dst, ':')
		var err error
		if dst, err = appendCEL(dst, e.val, true, limit); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// resultTypeError reports a value with no rendering, naming only its type.
func resultTypeError(v ref.Val) error {
	return &EvalError{Kind: ErrResultType, Type: v.Type().TypeName()}
}
