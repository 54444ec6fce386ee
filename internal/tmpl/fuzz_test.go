package tmpl

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTemplate compiles arbitrary template text (CEL included) and renders
// it over an arbitrary JSON payload: no panic, compile errors positioned
// inside the source, static templates render their own text, and
// rendering is deterministic.
func FuzzTemplate(f *testing.F) {
	seeds := []struct{ src, payload string }{
		{"", `{}`},
		{"plain text", `{}`},
		{"{{path}} {{now}} {{headers.x-a}} {{query.q}}", `{"a":1}`},
		{"New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}", `{"messages":[{"from":"a","subject":"b"}]}`},
		{"{{ payload.a.b[0] }}{{__proto__}}{{a.constructor}}", `{"a":{"b":[{"c":1e21}]}}`},
		{"{{ cel: payload.a + 1.0 }}", `{"a":2}`},
		{`{{ cel: {"}}": [1, 2u, "x", null, b"y"]} }}`, `{}`},
		{`{{ cel: r"\" }} {{ cel: '''}}''' }}`, `{}`},
		{"{{ a } }} {{ {{ }} {{", `[]`},
		{"{{ cel: payload.items.map(x, x * 2.0) }}", `{"items":[1,2,3]}`},
	}
	for _, s := range seeds {
		f.Add(s.src, []byte(s.payload))
	}
	env, err := NewEnv(20_000)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string, payload []byte) {
		tp, err := Compile(src, env)
		if err != nil {
			checkCompileError(t, src, err)
			return
		}
		if tp.Source() != src {
			t.Fatalf("Source() = %q, want %q", tp.Source(), src)
		}
		if !strings.Contains(src, "{{") != tp.IsStatic() {
			t.Fatalf("IsStatic() = %v for %q", tp.IsStatic(), src)
		}
		var body map[string]any
		_ = json.Unmarshal(payload, &body)
		v := &Vars{
			Payload: body,
			Headers: map[string]string{"x-a": "h"},
			Query:   map[string]string{"q": "v"},
			Path:    "p",
			Now:     testNow,
		}
		first, err1 := tp.RenderString(v)
		second, err2 := tp.Render(nil, v)
		if (err1 == nil) != (err2 == nil) || first != string(second) {
			t.Fatalf("renders differ: %q, %v vs %q, %v", first, err1, second, err2)
		}
		if err1 != nil {
			var ee *EvalError
			if !errors.As(err1, &ee) {
				t.Fatalf("render error %T %v is not *EvalError", err1, err1)
			}
			return
		}
		if tp.IsStatic() && first != src {
			t.Fatalf("static template rendered %q, want %q", first, src)
		}
	})
}

// checkCompileError requires an *Error positioned inside src.
func checkCompileError(t *testing.T, src string, err error) {
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Compile error %T %v is not *Error", err, err)
	}
	lines := strings.Split(src, "\n")
	if ce.Line < 1 || ce.Line > len(lines) {
		t.Fatalf("error line %d outside 1..%d: %v", ce.Line, len(lines), err)
	}
	if n := utf8.RuneCountInString(lines[ce.Line-1]); ce.Column < 1 || ce.Column > n+1 {
		t.Fatalf("error column %d outside 1..%d: %v", ce.Column, n+1, err)
	}
}
