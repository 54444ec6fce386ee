package tmpl

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestCELBoundsAttacks reproduces issue 17 item 2 and its relatives: each
// expression, at the default cost limit over a payload of body size, is
// refused with its bound's error, allocating a few MiB at most (the
// payload itself is ~260 KB), where unbounded it took seconds and up to
// gigabytes. Bytes allocated are measured, not time.
func TestCELBoundsAttacks(t *testing.T) {
	env := testEnv(t, 0)
	long := strings.Repeat("a", 128<<10)
	items := make([]any, 1000)
	for i := range items {
		items[i] = "item"
	}
	v := &Vars{Payload: map[string]any{"text": long, "from": "a", "to": long, "empty": "", "s": long[:100<<10],
		"items": items, "pattern": strings.Repeat("(a|b)", 10<<10)}}
	tests := []struct {
		name, expr string
		want       error
	}{
		{"replace growing every match", `payload.text.replace(payload.from, payload.to)`, ErrOutputLimit},
		{"replace of the empty string", `payload.text.replace(payload.empty, payload.to)`, ErrOutputLimit},
		{"replace with a count", `payload.text.replace(payload.from, payload.to, 100)`, ErrOutputLimit},
		{"concatenation inside map", `payload.items.map(x, payload.s + payload.s).size()`, ErrCostLimit},
		{"join of references", `payload.items.map(x, payload.s).join("")`, ErrOutputLimit},
		{"join with a long separator", `payload.items.join(payload.s)`, ErrOutputLimit},
		{"format of references", `"%s".format([payload.items.map(x, payload.s)])`, ErrOutputLimit},
		{"rendering a built list", `payload.items.map(x, payload.s)`, ErrOutputLimit},
		{"nested comprehension scanning", `payload.items.all(a, payload.items.exists(b, payload.s.contains(b + a)))`, ErrCostLimit},
		{"regexp from the payload", `payload.s.matches(payload.pattern)`, ErrCostLimit},
		{"size in a loop", `payload.items.all(i, payload.s.size() > 0)`, ErrCostLimit},
		{"lower in a loop", `payload.items.all(i, payload.s.lowerAscii() != "")`, ErrCostLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := Compile("{{ cel: "+tc.expr+" }}", env)
			if err != nil {
				t.Fatal(err)
			}
			var rerr error
			n := allocated(func() { _, rerr = tp.RenderString(v) })
			if !errors.Is(rerr, tc.want) {
				t.Fatalf("error %v, want %v", rerr, tc.want)
			}
			t.Logf("%v after allocating %d KiB", rerr, n>>10)
			if n > 32<<20 {
				t.Fatalf("allocated %d MiB before it was refused", n>>20)
			}
		})
	}
}

// TestCELBoundsKeepOrdinaryWork: expressions of ordinary size stay well
// within every bound.
func TestCELBoundsKeepOrdinaryWork(t *testing.T) {
	env := testEnv(t, 0)
	body := strings.Repeat("lorem ipsum ", 2000)
	v := &Vars{Payload: map[string]any{"body": body, "tags": []any{"a", "b", "c"}, "n": 3.0}}
	for expr, want := range map[string]string{
		`payload.body.replace("ipsum", "dolor").size()`:                "24000",
		`payload.tags.join(", ")`:                                      "a, b, c",
		`"%s has %d tags".format(["x", payload.tags.size()])`:          "x has 3 tags",
		`payload.tags.map(t, t + "!").join("")`:                        "a!b!c!",
		`payload.body.matches("^(lorem ipsum )+$")`:                    "true",
		`payload.tags.exists(t, payload.body.contains(t + "m ips"))`:   "false",
		`payload.tags.map(t, payload.body.substring(0, 5) + t).size()`: "3",
	} {
		tp, err := Compile("{{ cel: "+expr+" }}", env)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got, err := tp.RenderString(v); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", expr, got, err, want)
		}
	}
}

// TestCELTimeBound: an evaluation that stays within its cost limit but
// runs past its wall-time bound is stopped between comprehension
// iterations. The bound is shortened here; by default it is 1 s per
// 100,000 units of cost limit.
func TestCELTimeBound(t *testing.T) {
	env := testEnv(t, 1<<62)
	items := make([]any, 1000)
	v := &Vars{Payload: map[string]any{"items": items}}
	x, err := env.CompileBool(`payload.items.all(a, payload.items.all(b, payload.items.all(c, true)))`)
	if err != nil {
		t.Fatal(err)
	}
	x.prg.timeout = 20 * time.Millisecond
	start := time.Now()
	if _, err := x.Match(v); !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("Match = %v, want the time limit", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("stopped after %v (a billion iterations were asked for)", d)
	}
	if _, timeout := boundsFor(DefaultCostLimit); timeout != time.Second {
		t.Fatalf("default time bound %v", timeout)
	}
	if out, _ := boundsFor(DefaultCostLimit); out != 1_000_000 {
		t.Fatalf("default output bound %d", out)
	}
}

// TestCELMatchesParity: the bounded matches behaves as CEL's own for
// patterns that are not constants, and leaves constant ones alone.
func TestCELMatchesParity(t *testing.T) {
	env := testEnv(t, 0)
	v := &Vars{Payload: map[string]any{"s": "abc-123", "p": "^[a-z]+-[0-9]+$", "bad": "(", "n": 1.0}}
	for expr, want := range map[string]string{
		`payload.s.matches(payload.p)`:   "true",
		`matches(payload.s, payload.p)`:  "true",
		`payload.s.matches("^abc")`:      "true",
		`payload.s.matches(payload.s)`:   "true",
		`"xyz".matches(payload.p)`:       "false",
		`payload.s.matches(payload.bad)`: "error",
		`payload.n.matches(payload.p)`:   "error",
	} {
		tp, err := Compile("{{ cel: "+expr+" }}", env)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got, err := tp.RenderString(v)
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%s = %q (%v), want %q", expr, got, err, want)
		}
	}
}
