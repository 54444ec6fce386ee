package tmpl

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// testEnv builds an environment or fails the test. Its time bound
// is an hour: tests that are not about that bound must not depend on how
// busy the machine is (TestCELTimeBound sets its own).
func testEnv(t testing.TB, costLimit uint64) *Env {
	t.Helper()
	env, err := NewEnv(costLimit)
	if err != nil {
		t.Fatalf("NewEnv: %v", err)
	}
	env.timeout = time.Hour
	return env
}

func TestNewEnvDefaultCost(t *testing.T) {
	if got := testEnv(t, 0).CostLimit(); got != DefaultCostLimit {
		t.Errorf("CostLimit() = %d, want %d", got, DefaultCostLimit)
	}
	if got := testEnv(t, 42).CostLimit(); got != 42 {
		t.Errorf("CostLimit() = %d, want 42", got)
	}
}

func TestMatch(t *testing.T) {
	env := testEnv(t, 0)
	tests := []struct {
		expr string
		want bool
	}{
		{`payload.source == "gmail"`, true},
		{`payload.source == "github"`, false},
		{`headers["x-github-event"] == "push"`, true},
		{`"x-missing" in headers`, false},
		{`query.since == "yesterday"`, true},
		{`path == "gmail" && path.startsWith("gm")`, true},
		{`payload.messages[0].n > 2`, true},
		{`payload.messages[0].n == 3`, true},
		{`payload.user.age < 42`, true},
		{`size(payload.messages) == 1`, true},
		{`payload.messages.exists(m, m.subject.contains("bye"))`, true},
		{`has(payload.user.name) && !has(payload.user.email)`, true},
		{`payload.?user.?email.orValue("none") == "none"`, true},
		{`now > timestamp("2026-01-01T00:00:00Z")`, true},
		{`payload.messages[0].ok`, true},
		{`payload.user.name.lowerAscii() == "bob"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			x, err := env.CompileBool(tt.expr)
			if err != nil {
				t.Fatalf("CompileBool: %v", err)
			}
			got, err := x.Match(testVars(t))
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
			if x.Source() != tt.expr {
				t.Errorf("Source() = %q", x.Source())
			}
		})
	}
}

func TestMatchEmptyVars(t *testing.T) {
	x, err := testEnv(t, 0).CompileBool(`size(payload) == 0 && size(headers) == 0 && size(query) == 0 && path == ""`)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := x.Match(&Vars{}); err != nil || !ok {
		t.Errorf("Match(empty) = %v, %v; want true", ok, err)
	}
}

func TestCompileBoolErrors(t *testing.T) {
	env := testEnv(t, 0)
	tests := []struct {
		expr      string
		line, col int
		msg       string
	}{
		{`payload.a ==`, 1, 13, "Syntax error"},
		{`nope == 1`, 1, 1, "undeclared reference to 'nope'"},
		{`path == 1`, 1, 6, "no matching overload"},
		{"path == \"x\" &&\n  bogus", 2, 3, "undeclared reference to 'bogus'"},
		{`"é" + nope == ""`, 1, 7, "undeclared reference"},
		{`1 + 1`, 1, 1, "want bool"},
		{`path`, 1, 1, "want bool"},
		{`headers`, 1, 1, "want bool"},
		{``, 1, 1, "Syntax error"},
		{`path.matches("(")`, 1, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := env.CompileBool(tt.expr)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("CompileBool(%q) error = %v, want *Error", tt.expr, err)
			}
			if ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("CompileBool(%q) = %q, want %d:%d containing %q", tt.expr, err, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func TestMatchEvalErrors(t *testing.T) {
	env := testEnv(t, 0)
	v := testVars(t)
	v.Payload["secret"] = "hunter2-payload-value"
	tests := []struct {
		expr string
		kind error
	}{
		{`payload.nope == "x"`, ErrEval},
		{`int(payload.secret) > 0`, ErrEval},
		{`payload[payload.secret] == 1`, ErrEval},
		{`payload.secret`, ErrResultType},
		{`payload.user`, ErrResultType},
		{`payload.messages[5].id == "x"`, ErrEval},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			x, err := env.CompileBool(tt.expr)
			if err != nil {
				t.Fatalf("CompileBool: %v", err)
			}
			ok, err := x.Match(v)
			if ok || !errors.Is(err, tt.kind) {
				t.Fatalf("Match = %v, %v; want false, %v", ok, err, tt.kind)
			}
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not *EvalError", err)
			}
			if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "payload") {
				t.Errorf("error message %q leaks payload or expression text", msg)
			}
		})
	}
}

func TestCostLimit(t *testing.T) {
	// A cross product over a 100-element list costs tens of thousands of
	// units: over a small limit, within the default.
	const expr = `payload.items.all(a, payload.items.all(b, a + b >= 0.0))`
	items := make([]any, 100)
	for i := range items {
		items[i] = float64(i)
	}
	v := &Vars{Payload: map[string]any{"items": items}}
	tests := []struct {
		limit   uint64
		wantErr error
	}{
		{1000, ErrCostLimit},
		{0, nil},
	}
	for _, tt := range tests {
		env := testEnv(t, tt.limit)
		x, err := env.CompileBool(expr)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := x.Match(v)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != ok {
			t.Errorf("limit %d: Match = %v, %v; want error %v", tt.limit, ok, err, tt.wantErr)
		}
		tp, err := Compile("{{ cel: "+expr+" }}", env)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tp.RenderString(v); !errors.Is(err, tt.wantErr) {
			t.Errorf("limit %d: render error %v, want %v", tt.limit, err, tt.wantErr)
		}
	}
}

func TestCELRendering(t *testing.T) {
	env := testEnv(t, 0)
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"string", `{{ cel: "a\"b" + path }}`, `a"bgmail`},
		{"int", `{{cel: 1 + 2}}`, "3"},
		{"negative int", `{{cel: -7}}`, "-7"},
		{"uint", `{{cel: 7u}}`, "7"},
		{"integral double", `{{cel: 1.0}}`, "1"},
		{"double", `{{cel: 2.5}}`, "2.5"},
		{"large double", `{{cel: 1e21}}`, "1e+21"},
		{"small double", `{{cel: 1e-7}}`, "1e-7"},
		{"infinity", `{{cel: 1.0/0.0}}`, "Infinity"},
		{"bool", `{{cel: 1 < 2}}`, "true"},
		{"null", `[{{cel: null}}]`, "[]"},
		{"list", `{{cel: [1, "a", null, 1.5, [true], 0.0/0.0]}}`, `[1,"a",null,1.5,[true],null]`},
		{"map sorted", `{{cel: {"b": 1, "a": [true], "c": {"z": "\n"}}}}`, `{"a":[true],"b":1,"c":{"z":"\n"}}`},
		{"map non-string keys", `{{cel: {2: "two", 10: "ten"}}}`, `{"10":"ten","2":"two"}`},
		{"bytes", `{{cel: b"hi"}}`, "aGk="},
		{"bytes nested", `{{cel: [b"hi"]}}`, `["aGk="]`},
		{"timestamp", `{{cel: timestamp("2026-01-02T03:04:05.678901Z")}}`, "2026-01-02T03:04:05.678Z"},
		{"now", `{{cel: now}}`, "2026-11-22T18:33:35.123Z"},
		{"timestamp nested", `{{cel: [now]}}`, `["2026-11-22T18:33:35.123Z"]`},
		{"duration", `{{cel: duration("1.5s")}}`, "1.5s"},
		{"optional none", `[{{cel: payload.?nope}}]`, "[]"},
		{"optional value", `{{cel: payload.?user.name}}`, "Bob"},
		{"headers map", `{{cel: headers}}`, `{"content-type":"application/json","x-github-event":"push"}`},
		{"filtered list", `{{cel: payload.messages.map(m, m.id)}}`, `["m1"]`},
		{"string ext", `{{cel: payload.user.name.upperAscii()}}`, "BOB"},
		{"map literal with braces in strings", `{{ cel: {"}}": "{"}["}}"] }}!`, "{!"},
		{"raw string", `{{ cel: r"\d}}" }}`, `\d}}`},
		{"triple-quoted", `{{ cel: """a "}}" b""" }}`, `a "}}" b`},
		{"multi-line", "{{ cel:\n  path +\n  \"!\" }}", "gmail!"},
		{"mixed with reference", `{{path}}:{{cel: path.size()}}:{{user.name}}`, "gmail:5:Bob"},
		{"cel prefix only when first", `{{payload.cel: x}}`, "not cel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Compile(tt.src, env)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.src, err)
			}
			if tp.IsStatic() {
				t.Errorf("IsStatic() = true for %q", tt.src)
			}
			got, err := tp.RenderString(testVars(t))
			if err != nil {
				t.Fatalf("RenderString: %v", err)
			}
			if got != tt.want {
				t.Errorf("RenderString(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

// TestCELMatchesReference renders every fixture path both ways: through the
// reference grammar and through CEL, and expects the same text.
func TestCELMatchesReference(t *testing.T) {
	env := testEnv(t, 0)
	paths := []struct{ ref, cel string }{
		{"source", "payload.source"},
		{"messages[0].subject", "payload.messages[0].subject"},
		{"messages[0].n", "payload.messages[0].n"},
		{"messages[0].ok", "payload.messages[0].ok"},
		{"messages[0].tags", "payload.messages[0].tags"},
		{"messages", "payload.messages"},
		{"user", "payload.user"},
		{"user.age", "payload.user.age"},
		{"user.nil", "payload.user.nil"},
		{"user.obj", "payload.user.obj"},
		{"count", "payload.count"},
		{"tiny", "payload.tiny"},
		{"headers.content-type", `headers["content-type"]`},
		{"query.since", "query.since"},
		{"path", "path"},
		{"now", "now"},
	}
	for _, p := range paths {
		t.Run(p.ref, func(t *testing.T) {
			want := mustRender(t, "{{"+p.ref+"}}", env)
			if got := mustRender(t, "{{ cel: "+p.cel+" }}", env); got != want {
				t.Errorf("cel %q = %q, reference %q = %q", p.cel, got, p.ref, want)
			}
		})
	}
}

func mustRender(t *testing.T, src string, env *Env) string {
	t.Helper()
	tp, err := Compile(src, env)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	s, err := tp.RenderString(testVars(t))
	if err != nil {
		t.Fatalf("RenderString(%q): %v", src, err)
	}
	return s
}

func TestCELPlaceholderCompileErrors(t *testing.T) {
	env := testEnv(t, 0)
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"undeclared", "Hi {{ cel: foo }}", 1, 12, "undeclared reference to 'foo'"},
		{"syntax", "{{cel: 1 + }}", 1, 11, "Syntax error"},
		{"second line of template", "a\nb {{ cel: path == }}", 2, 18, "Syntax error"},
		{"second line of expression", "x {{ cel:\n   path +\n   nope }}", 3, 4, "undeclared reference to 'nope'"},
		{"characters not bytes", "é {{ cel: \"ü\" + nope }}", 1, 17, "undeclared reference"},
		{"empty", "{{ cel: }}", 1, 1, "empty CEL expression"},
		{"unterminated", "{{ cel: path ", 1, 1, "unterminated {{"},
		{"unterminated string", `{{ cel: "abc }}`, 1, 1, "unterminated {{"},
		{"stray brace", "{{ cel: path } }}", 1, 14, "stray }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, env)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q) error = %v, want *Error", tt.src, err)
			}
			if ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("Compile(%q) = %q, want %d:%d containing %q", tt.src, err, tt.line, tt.col, tt.msg)
			}
		})
	}
}

func TestCELPlaceholderEvalError(t *testing.T) {
	env := testEnv(t, 0)
	tp, err := Compile("ok {{path}}\nthen {{ cel: payload.user.name + payload.nope }}", env)
	if err != nil {
		t.Fatal(err)
	}
	dst := []byte("keep")
	out, err := tp.Render(dst, testVars(t))
	var ee *EvalError
	if !errors.As(err, &ee) || !errors.Is(err, ErrEval) {
		t.Fatalf("Render error = %v, want *EvalError wrapping ErrEval", err)
	}
	if ee.Line != 2 || ee.Column != 6 {
		t.Errorf("EvalError at %d:%d, want 2:6", ee.Line, ee.Column)
	}
	if string(out) != "keep" {
		t.Errorf("Render returned %q on error, want dst unchanged", out)
	}
	if strings.Contains(err.Error(), "Bob") || strings.Contains(err.Error(), "nope") {
		t.Errorf("error %q leaks payload or expression text", err)
	}
	if s, err := tp.RenderString(testVars(t)); s != "" || err == nil {
		t.Errorf("RenderString = %q, %v; want an error", s, err)
	}
}

func TestCELResultTypeError(t *testing.T) {
	env := testEnv(t, 0)
	tp, err := Compile("{{ cel: type(path) }}", env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tp.RenderString(testVars(t))
	if !errors.Is(err, ErrResultType) {
		t.Errorf("error = %v, want ErrResultType", err)
	}
}

// TestStringSizeCost checks that size() on a long string is charged by
// length: repeated over a list it exceeds a limit that the same loop over
// a short string stays within.
func TestStringSizeCost(t *testing.T) {
	items := make([]any, 100)
	for i := range items {
		items[i] = float64(i)
	}
	env := testEnv(t, 5000)
	x, err := env.CompileBool(`payload.items.all(i, payload.s.size() > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		size    int
		wantErr error
	}{
		{10, nil},
		{10_000, ErrCostLimit},
	}
	for _, tt := range tests {
		v := &Vars{Payload: map[string]any{"items": items, "s": strings.Repeat("x", tt.size)}}
		if _, err := x.Match(v); !errors.Is(err, tt.wantErr) {
			t.Errorf("string of %d bytes: error %v, want %v", tt.size, err, tt.wantErr)
		}
	}
}
