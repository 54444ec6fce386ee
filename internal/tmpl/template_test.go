package tmpl

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 22, 18, 33, 35, 123456789, time.UTC)

const templateFixture = `{
	"source": "gmail",
	"messages": [{"id": "m1", "from": "Ann <ann@example.com>", "subject": "Hi & bye", "n": 3, "ok": true, "tags": ["a", "b"]}],
	"user": {"name": "Bob", "age": 41.5, "nil": null, "obj": {"z": 1, "a": [true, null]}},
	"count": 1e21,
	"tiny": 1e-7,
	"path": "payload-path",
	"headers": {"x": "payload-headers"},
	"payload": {"x": "payload-payload"},
	"cel: x": "not cel"
}`

// testVars returns a request view over the template fixture.
func testVars(t testing.TB) *Vars {
	return &Vars{
		Payload: decode(t, templateFixture),
		Headers: map[string]string{"x-github-event": "push", "content-type": "application/json"},
		Query:   map[string]string{"since": "yesterday", "__proto__": "hidden"},
		Path:    "gmail",
		Now:     testNow,
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"empty", "", ""},
		{"literal only", "just text, no braces", "just text, no braces"},
		{"literal braces", "a } b { c }} d", "a } b { c }} d"},
		{"path", "{{path}}", "gmail"},
		{"now", "{{now}}", "2026-11-22T18:33:35.123Z"},
		{"header lower-cased", "{{ headers.X-GitHub-Event }}", "push"},
		{"header missing", "[{{headers.x-missing}}]", "[]"},
		{"query", "{{query.since}}", "yesterday"},
		{"query missing", "[{{query.until}}]", "[]"},
		{"query blocked name", "[{{query.__proto__}}]", "[]"},
		{"header blocked name", "[{{headers.Constructor}}]", "[]"},
		{"payload prefix", "{{payload.user.name}}", "Bob"},
		{"bare path", "{{user.name}}", "Bob"},
		{"array index", "{{messages[0].subject}}", "Hi & bye"},
		{"array index dotted", "{{messages.0.id}}", "m1"},
		{"array out of range", "[{{messages[1].id}}]", "[]"},
		{"number", "{{user.age}}", "41.5"},
		{"integral number", "{{messages[0].n}}", "3"},
		{"exponent number", "{{count}} {{tiny}}", "1e+21 1e-7"},
		{"boolean", "{{messages[0].ok}}", "true"},
		{"null", "[{{user.nil}}]", "[]"},
		{"array as JSON", "{{messages[0].tags}}", `["a","b"]`},
		{"object as JSON", "{{user.obj}}", `{"a":[true,null],"z":1}`},
		{"missing", "[{{nope.nope}}]", "[]"},
		{"blocked proto", "[{{__proto__}}]", "[]"},
		{"blocked prototype", "[{{user.prototype}}]", "[]"},
		{"blocked constructor", "[{{payload.constructor.name}}]", "[]"},
		{"whitespace inside braces", "{{   user.name \t\n }}", "Bob"},
		{"no whitespace", "{{user.name}}", "Bob"},
		{"bare path named path needs prefix", "{{payload.path}}", "payload-path"},
		{"headers via payload prefix", "{{payload.headers.x}}", "payload-headers"},
		{"payload key named payload", "{{payload.payload.x}}", "payload-payload"},
		{"extra closing brace", "{{path}}}", "gmail}"},
		{"adjacent placeholders", "{{path}}{{path}}", "gmailgmail"},
		{"mixed", "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n", "New email from Ann <ann@example.com>\nSubject: Hi & bye\n"},
		{"unicode literal", "héllo {{path}} 世界", "héllo gmail 世界"},
		{"brace before placeholder", "{{{path}}", ""},
		{"key with space", "{{ messages[0].from }}", "Ann <ann@example.com>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Compile(tt.src, nil)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tt.src, err)
			}
			got, err := tp.RenderString(testVars(t))
			if err != nil {
				t.Fatalf("RenderString: %v", err)
			}
			if got != tt.want {
				t.Errorf("RenderString(%q) = %q, want %q", tt.src, got, tt.want)
			}
			b, err := tp.Render([]byte("prefix:"), testVars(t))
			if err != nil || string(b) != "prefix:"+tt.want {
				t.Errorf("Render(%q) = %q, %v; want %q", tt.src, b, err, "prefix:"+tt.want)
			}
			if tp.Source() != tt.src {
				t.Errorf("Source() = %q, want %q", tp.Source(), tt.src)
			}
			if static := !strings.Contains(tt.src, "{{"); tp.IsStatic() != static {
				t.Errorf("IsStatic() = %v, want %v", tp.IsStatic(), static)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string
	}{
		{"unterminated", "Hello {{ name", 1, 7, "unterminated {{"},
		{"unterminated single brace", "Hello {{ name }", 1, 7, "unterminated {{"},
		{"unterminated at end", "{{", 1, 1, "unterminated {{"},
		{"unterminated second", "{{path}} and {{ now", 1, 14, "unterminated {{"},
		{"empty", "a {{}} b", 1, 3, "empty placeholder"},
		{"blank", "a {{  \t }} b", 1, 3, "empty placeholder"},
		{"stray brace", "{{ a } b }}", 1, 6, "stray } inside placeholder"},
		{"nested open", "{{ a {{ b }}", 1, 6, "{{ inside placeholder"},
		{"empty header", "{{headers.}}", 1, 3, "empty header name"},
		{"empty query", "{{ query. }}", 1, 4, "empty query parameter name"},
		{"empty payload path", "{{payload.}}", 1, 3, "empty payload path"},
		{"dots only", "{{ .. }}", 1, 4, "empty payload path"},
		{"second line", "line one\nok {{ path }} then {{", 2, 20, "unterminated {{"},
		{"column counts characters", "héllo wörld {{", 1, 13, "unterminated {{"},
		{"cel without env", "x {{ cel: 1 }}", 1, 3, "needs a CEL environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.src, nil)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q) error = %v, want *Error", tt.src, err)
			}
			if ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Msg, tt.msg) {
				t.Errorf("Compile(%q) = %d:%d %q, want %d:%d containing %q", tt.src, ce.Line, ce.Column, ce.Msg, tt.line, tt.col, tt.msg)
			}
			if prefix := fmt.Sprintf("%d:%d: ", tt.line, tt.col); !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("message %q does not start with line:column", err.Error())
			}
		})
	}
}

func TestRenderNilMaps(t *testing.T) {
	tp, err := Compile("[{{path}}|{{headers.a}}|{{query.b}}|{{c}}]", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.RenderString(&Vars{Path: "p"})
	if err != nil || got != "[p|||]" {
		t.Errorf("RenderString = %q, %v; want %q", got, err, "[p|||]")
	}
}

func TestRenderZeroNow(t *testing.T) {
	tp, err := Compile("{{now}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC().Truncate(time.Millisecond)
	got, err := tp.RenderString(&Vars{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(isoMillis, got)
	if err != nil {
		t.Fatalf("now rendered %q: %v", got, err)
	}
	if at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("now rendered %v, want about %v", at, before)
	}
}

func TestRenderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector")
	}
	tp, err := Compile("From {{messages[0].from}} via {{headers.x-github-event}} at {{path}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	v := testVars(t)
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(200, func() { _, _ = tp.Render(buf[:0], v) }); n != 0 {
		t.Errorf("Render into a sized buffer allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = tp.RenderString(v) }); n > 1 && !raceEnabled {
		// (-race makes sync.Pool drop buffers at random)
		t.Errorf("RenderString allocates %v times, want at most 1 (the result)", n)
	}
	static, err := Compile("no placeholders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = static.RenderString(v) }); n != 0 {
		t.Errorf("static RenderString allocates %v times, want 0", n)
	}
}

func TestRenderConcurrent(t *testing.T) {
	tp, err := Compile("{{messages[0].subject}}/{{path}}/{{user.obj}}", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tp.RenderString(testVars(t))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			v := testVars(t)
			for range 200 {
				if got, err := tp.RenderString(v); err != nil || got != want {
					t.Errorf("concurrent render = %q, %v; want %q", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestRenderEvent checks the event keyword: the provider's event name
// when Vars.Event is set, else the payload member event as before (a
// mapping without verify, or a provider without event names, renders
// what it rendered); event.x and payload.event always read the payload;
// CEL sees the variable event.
func TestRenderEvent(t *testing.T) {
	env, err := NewEnv(0)
	if err != nil {
		t.Fatal(err)
	}
	payload := `{"event":{"type":"app_mention","text":"hi"},"type":"x"}`
	flat := `{"event":"meeting.started"}`
	for _, tc := range []struct {
		name, src, payload, event, want string
	}{
		{"provider event", "{{event}}", payload, "push", "push"},
		{"provider event, spaces", "{{ event }}", payload, "push", "push"},
		{"no provider event: payload member", "{{event}}", flat, "", "meeting.started"},
		{"no provider event: object as JSON", "{{event}}", payload, "", `{"text":"hi","type":"app_mention"}`},
		{"no provider event, no member", "[{{event}}]", `{}`, "", "[]"},
		{"dotted path stays the payload's", "{{event.type}}", payload, "push", "app_mention"},
		{"payload.event stays the payload's", "{{payload.event}}", flat, "push", "meeting.started"},
		{"bracket path stays the payload's", "{{event[type]}}", payload, "push", "app_mention"},
		{"cel event", `{{ cel: event + "/" + payload.type }}`, payload, "push", "push/x"},
		{"cel event empty", `[{{ cel: event }}]`, payload, "", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := Compile(tc.src, env)
			if err != nil {
				t.Fatalf("Compile(%q): %v", tc.src, err)
			}
			got, err := tp.RenderString(&Vars{Payload: decode(t, tc.payload), Event: tc.event})
			if err != nil || got != tc.want {
				t.Errorf("RenderString(%q) = %q, %v; want %q", tc.src, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		expr, event string
		want        bool
	}{
		{`event == "push"`, "push", true},
		{`event == "push"`, "pull_request", false},
		{`event == ""`, "", true},
		{`event.startsWith("orders/")`, "orders/create", true},
	} {
		x, err := env.CompileBool(tc.expr)
		if err != nil {
			t.Fatalf("CompileBool(%q): %v", tc.expr, err)
		}
		got, err := x.Match(&Vars{Payload: decode(t, flat), Event: tc.event})
		if err != nil || got != tc.want {
			t.Errorf("%s with event %q = %v, %v; want %v", tc.expr, tc.event, got, err, tc.want)
		}
	}
}
