package transform

import (
	"context"
	"net/url"
	"testing"
)

// BenchmarkRun measures one call of a trivial transform and of the GitHub
// example, including ctx conversion and result conversion.
func BenchmarkRun(b *testing.B) {
	u, _ := url.Parse("/hooks/github?x=1")
	cases := []struct {
		name string
		src  string
		in   Input
	}{
		{"trivial", `export default (ctx) => ({ kind: "wake", text: ctx.path })`, Input{Path: "bench", URL: u}},
		{"github", "", githubInput("opened")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var p *Program
			var err error
			if tc.src == "" {
				p, err = Compile(examplePath("github.ts"), "", Options{})
			} else {
				p, err = Compile(writeFile(b, b.TempDir(), "bench.ts", tc.src), "", Options{})
			}
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out, err := p.Run(ctx, tc.in)
				if err != nil || out == nil {
					b.Fatalf("Run = %v, %v", out, err)
				}
			}
		})
	}
}

// BenchmarkRunParallel measures throughput with concurrent callers.
func BenchmarkRunParallel(b *testing.B) {
	p, err := Compile(examplePath("github.ts"), "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := githubInput("opened")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if out, err := p.Run(context.Background(), in); err != nil || out == nil {
				b.Fatalf("Run = %v, %v", out, err)
			}
		}
	})
}

// BenchmarkRegExpBuiltins measures a transform that leans on the regular
// expression built-ins the sandbox reimplements (regexp_symbols.go):
// replace with a template and a function, split, match and matchAll over
// a 1 KB text (with 2 KB, the template replace is refused on main:
// its bound counted every $ as a copy of the subject per match).
func BenchmarkRegExpBuiltins(b *testing.B) {
	p, err := Compile(writeFile(b, b.TempDir(), "re.js", `export default (ctx) => {
  const t = ctx.payload.text;
  const html = t.replace(/[<>&]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;" })[c]);
  const refs = (t.match(/#\d+/g) || []).length;
  const words = t.split(/\s+/).length;
  const tagged = t.replace(/(\w+)@(\w+)/g, "$2:$1");
  let n = 0;
  for (const m of t.matchAll(/issue (\d+)/g)) n += Number(m[1]);
  return { message: html.slice(0, 40) + tagged.slice(0, 40), refs, words, n };
};`), "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	line := "Fixes #12 & #345 in <core>: see issue 7, thanks user@example and issue 42.\n"
	text := ""
	for len(text) < 1024 {
		text += line
	}
	in := Input{Payload: map[string]any{"text": text}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out, err := p.Run(ctx, in); err != nil || out == nil {
			b.Fatalf("Run = %v, %v", out, err)
		}
	}
}

// BenchmarkBigInt measures a transform that uses BigInt as a webhook
// transform does, reading a snowflake id's timestamp, with a loop of
// comparisons and multiplications on numbers: in a module that uses
// BigInt these operators are compiled as checked operations (bigint.go).
func BenchmarkBigInt(b *testing.B) {
	p, err := Compile(writeFile(b, b.TempDir(), "big.js", `export default (ctx) => {
  const id = BigInt(ctx.payload.id);
  const at = Number(id >> 22n) + 1420070400000;
  let h = 0;
  for (let i = 0; i < 64; i++) h = (h * 31 + i) % 1000003;
  return { message: "at " + at + " worker " + ((id & 0x3e0000n) >> 17n) + " hash " + h };
};`), "", Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Payload: map[string]any{"id": "175928847299117063"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out, err := p.Run(ctx, in); err != nil || out == nil {
			b.Fatalf("Run = %v, %v", out, err)
		}
	}
}
