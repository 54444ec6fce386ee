package tmpl

import "testing"

// threePlaceholders is a typical mapping message: a nested payload path, a
// header and the sub-path.
const threePlaceholders = "New event from {{messages[0].from}} ({{headers.x-github-event}}) on {{path}}"

func BenchmarkRender3(b *testing.B) {
	tp, err := Compile(threePlaceholders, nil)
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = tp.Render(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderString3(b *testing.B) {
	tp, err := Compile(threePlaceholders, nil)
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.RenderString(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderObject(b *testing.B) {
	tp, err := Compile("{{user}} {{messages}}", nil)
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.RenderString(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderCEL(b *testing.B) {
	tp, err := Compile(`{{ cel: payload.messages[0].subject.upperAscii() }}`, testEnv(b, 0))
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.RenderString(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	x, err := testEnv(b, 0).CompileBool(`payload.source == "gmail" && headers["x-github-event"] == "push"`)
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := x.Match(v); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkMatchComprehension: a match with a comprehension, the
// evaluations that run under a time bound (evalContext).
func BenchmarkMatchComprehension(b *testing.B) {
	env, err := NewEnv(0) // the real time bound, not testEnv's hour
	if err != nil {
		b.Fatal(err)
	}
	x, err := env.CompileBool(`payload.messages.exists(m, m.subject.startsWith("Re"))`)
	if err != nil {
		b.Fatal(err)
	}
	v := testVars(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Match(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(threePlaceholders, nil); err != nil {
			b.Fatal(err)
		}
	}
}
