package tmpl

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/caddyhook/caddyhook/internal/jsonenc"
)

// isoMillis is the layout of JavaScript's Date.prototype.toISOString.
const isoMillis = "2006-01-02T15:04:05.000Z"

// AppendValue renders v like the reference gateway: nil as nothing, a string
// as-is, a number as JavaScript prints it, a bool as true/false, a
// time.Time like toISOString, and arrays and objects as compact JSON with
// sorted keys. It handles the shapes encoding/json decodes into (plus Go's
// integer types, map[string]string and []string); anything else is
// marshalled with encoding/json, without HTML escaping.
func AppendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return dst
	case string:
		return append(dst, x...)
	case time.Time:
		return x.UTC().AppendFormat(dst, isoMillis)
	case float64:
		return appendJSNumber(dst, x)
	case float32:
		return appendJSNumber(dst, float64(x))
	}
	return appendJSON(dst, v)
}

// appendJSON appends v as JSON.stringify would.
func appendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case string:
		return appendJSONString(dst, x)
	case bool:
		return strconv.AppendBool(dst, x)
	case float64:
		return appendJSONNumber(dst, x)
	case float32:
		return appendJSONNumber(dst, float64(x))
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case uint64:
		return strconv.AppendUint(dst, x, 10)
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10)
	case json.Number:
		return append(dst, x...)
	case time.Time:
		dst = append(dst, '"')
		dst = x.UTC().AppendFormat(dst, isoMillis)
		return append(dst, '"')
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		return appendJSONObject(dst, x)
	case map[string]string:
		return appendJSONObject(dst, x)
	}
	return appendMarshalled(dst, v)
}

// appendJSONObject appends m with its keys in sorted order.
func appendJSONObject[V any](dst []byte, m map[string]V) []byte {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSON(dst, m[k])
	}
	return append(dst, '}')
}

// appendMarshalled is the fallback for types the reference never produces.
func appendMarshalled(dst []byte, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return append(dst, "null"...)
	}
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// appendJSONString appends s quoted as JSON.stringify quotes it.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }
