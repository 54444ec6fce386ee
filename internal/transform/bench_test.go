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
