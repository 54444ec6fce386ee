package tmpl

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decode decodes a JSON object the way the handler does.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decoding fixture: %v", err)
	}
	return m
}

const lookupFixture = `{
	"a": {"b": {"c": "deep"}},
	"messages": [{"subject": "hi", "id": "m1"}, {"subject": "second"}],
	"obj": {"0": "zero", "01": "zero-one"},
	"n": null,
	"s": "text",
	"arr": [10, 20],
	"x y": "spaced",
	"constructor": "present but blocked",
	"nested": [[1, 2], [3]]
}`

func TestLookup(t *testing.T) {
	root := decode(t, lookupFixture)
	tests := []struct {
		path   string
		want   any
		wantOK bool
	}{
		{"s", "text", true},
		{"a.b.c", "deep", true},
		{"a.b", map[string]any{"c": "deep"}, true},
		{"messages[0].subject", "hi", true},
		{"messages.0.subject", "hi", true},
		{"messages[1].subject", "second", true},
		{"messages[0]subject", "hi", true},
		{"messages[2]", nil, false},
		{"messages[-1]", nil, false},
		{"messages[01]", nil, false},
		{"messages[99999999999999999999]", nil, false},
		{"nested[1][0]", float64(3), true},
		{"obj[0]", "zero", true},
		{"obj.01", "zero-one", true},
		{"obj[1]", nil, false},
		{"a..b...c", "deep", true},
		{".s", "text", true},
		{"x y", "spaced", true},
		{"n", nil, true},
		{"n.x", nil, false},
		{"s.length", nil, false},
		{"s[0]", nil, false},
		{"arr.length", nil, false},
		{"arr[1]", float64(20), true},
		{"missing", nil, false},
		{"a.missing.c", nil, false},
		{"__proto__", nil, false},
		{"a.__proto__", nil, false},
		{"a.prototype", nil, false},
		{"constructor", nil, false},
		{"a.b.constructor", nil, false},
		{"missing.constructor", nil, false},
		{"", nil, false},
		{".", nil, false},
		{"[]", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := ParsePath(tt.path)
			if err != nil {
				if tt.wantOK {
					t.Fatalf("ParsePath(%q): %v", tt.path, err)
				}
				return
			}
			got, ok := p.Lookup(root)
			if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParsePath(%q).Lookup = %#v, %v; want %#v, %v", tt.path, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParsePathEmpty(t *testing.T) {
	for _, path := range []string{"", ".", "..", "[]", "[.]"} {
		if _, err := ParsePath(path); err == nil {
			t.Errorf("ParsePath(%q) succeeded, want an error", path)
		}
	}
	var zero Path
	if v, ok := zero.Lookup(map[string]any{"": 1}); ok {
		t.Errorf("zero Path resolved to %v", v)
	}
}

func TestLookupNonJSONRoot(t *testing.T) {
	p, err := ParsePath("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []any{nil, "s", 1.5, true, map[string]int{"a": 1}} {
		if v, ok := p.Lookup(root); ok {
			t.Errorf("Lookup(%T, a) = %v, want missing", root, v)
		}
	}
}

func TestLookupAllocs(t *testing.T) {
	root := decode(t, lookupFixture)
	p, err := ParsePath("messages[0].subject")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { p.Lookup(root) }); n != 0 {
		t.Errorf("Path.Lookup allocates %v times", n)
	}
}
