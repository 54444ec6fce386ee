package tmpl

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestAppendValue(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, ""},
		{"empty string", "", ""},
		{"string as-is", `a "b" <c> & d`, `a "b" <c> & d`},
		{"true", true, "true"},
		{"false", false, "false"},
		{"integral float", float64(42), "42"},
		{"fraction", 2.5, "2.5"},
		{"large", 1e21, "1e+21"},
		{"NaN top level", math.NaN(), "NaN"},
		{"int", -7, "-7"},
		{"int64", int64(1) << 60, "1152921504606846976"},
		{"uint64", uint64(math.MaxUint64), "18446744073709551615"},
		{"float32", float32(0.5), "0.5"},
		{"json.Number", json.Number("1.50"), "1.50"},
		{"time", time.Date(2026, 11, 22, 19, 33, 35, 123456789, time.FixedZone("x", 3600)), "2026-11-22T18:33:35.123Z"},
		{"empty array", []any{}, "[]"},
		{"array", []any{"a", 1.0, true, nil, []any{}}, `["a",1,true,null,[]]`},
		{"empty object", map[string]any{}, "{}"},
		{"sorted keys", map[string]any{"b": 1.0, "a": "x", "A": nil, "10": 2.0, "9": 3.0}, `{"10":2,"9":3,"A":null,"a":"x","b":1}`},
		{"nested", map[string]any{"m": []any{map[string]any{"k": "v"}}}, `{"m":[{"k":"v"}]}`},
		{"non-finite in JSON", []any{math.NaN(), math.Inf(1)}, "[null,null]"},
		{"escapes", []any{"q\"b\\\n\r\t\b\f\x00\x1f\x7f"}, `["q\"b\\\n\r\t\b\f\u0000\u001f` + "\x7f" + `"]`},
		{"no HTML escaping", []any{"<a>&</a>"}, `["<a>&</a>"]`},
		{"line separators raw", []any{"\u2028\u2029"}, "[\"\u2028\u2029\"]"},
		{"invalid UTF-8", []any{"a\xffb"}, "[\"a\ufffdb\"]"},
		{"multi-byte", []any{"héllo 世界 🎉"}, `["héllo 世界 🎉"]`},
		{"string map", map[string]string{"b": "2", "a": "1"}, `{"a":"1","b":"2"}`},
		{"string slice", []string{"x", "y\n"}, `["x","y\n"]`},
		{"fallback struct", struct {
			A string `json:"a"`
		}{"<"}, `{"a":"<"}`},
		{"fallback unmarshallable", []any{make(chan int)}, "[null]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendValue(nil, tt.in)); got != tt.want {
				t.Errorf("AppendValue = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppendValueKeepsPrefix(t *testing.T) {
	got := AppendValue([]byte("pre:"), map[string]any{"a": 1.0})
	if string(got) != `pre:{"a":1}` {
		t.Errorf("AppendValue did not append: %q", got)
	}
}

// FuzzAppendJSON checks that objects and arrays render as JSON that decodes
// back to the same value.
func FuzzAppendJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `[1,"a",null]`, `{"a":{"b":[1.5e300,-0,"\u2028"]}}`, `"x\u0000"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		out := appendJSON(nil, v)
		var back any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("appendJSON(%s) = %q: not JSON: %v", data, out, err)
		}
		if !reflect.DeepEqual(normalizeNegZero(v), normalizeNegZero(back)) {
			t.Fatalf("appendJSON(%s) = %q decodes to %#v, want %#v", data, out, back, v)
		}
	})
}

// normalizeNegZero maps -0 to 0, which JSON.stringify does too.
func normalizeNegZero(v any) any {
	switch x := v.(type) {
	case float64:
		if x == 0 {
			return 0.0
		}
	case []any:
		for i := range x {
			x[i] = normalizeNegZero(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normalizeNegZero(x[k])
		}
	}
	return v
}
