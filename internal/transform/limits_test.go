package transform

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTimeBudget: scripts that never finish are stopped within twice the
// budget, whatever they spin in.
func TestTimeBudget(t *testing.T) {
	const budget = 100 * time.Millisecond
	tests := []struct {
		name, src string
		allocates bool // may hit the allocation watchdog first
	}{
		{"for loop", `export default () => { for (;;) {} };`, false},
		{"while with work", `export default () => { let a = 0; while (true) { a = (a + 1) % 7; } };`, false},
		{"after await", `export default async () => { await null; for (;;) {} };`, false},
		{"microtask loop", `export default async () => { for (;;) { await null; } };`, true},
		{"promise chain", `export default () => { const spin = () => Promise.resolve().then(spin); return spin(); };`, true},
		{"in getter of result", `export default () => ({ get x() { for (;;) {} } });`, false},
		{"catch cannot swallow", `export default () => { for (;;) { try { for (;;) {} } catch (e) {} } };`, false},
		{"finally cannot swallow", `export default () => { try { for (;;) {} } finally { return { escaped: true }; } };`, false},
		{"regexp (linear engine)", `export default () => { const s = "a".repeat(5000) + "!"; for (;;) /^(a+)+$/.test(s); };`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, "m.js", tc.src, "", Options{Timeout: budget})
			start := time.Now()
			_, err := p.Run(context.Background(), Input{})
			elapsed := time.Since(start)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Run = %v, want *Error", err)
			}
			if tc.allocates && e.Kind == KindMemory {
				return // stopped even sooner, by the allocation watchdog
			}
			// (a regular-expression step that spans a long wait for the
			// CPU reads as a possible engine timeout: also a timeout)
			if e.Kind != KindTimeout || !strings.Contains(e.Message, "time budget") && !strings.Contains(e.Message, "regular expression") {
				t.Fatalf("error %v, want a time budget timeout", e)
			}
			if elapsed > hangBound {
				t.Fatalf("stopped after %v: the budget %v did not stop it", elapsed, budget)
			}
			if elapsed < budget {
				t.Fatalf("stopped after %v, before the budget %v", elapsed, budget)
			}
		})
	}
}

// stuckJob blocks the worker in Go code, which the runtime's interrupt
// cannot reach, until release is closed: a stand-in for a native
// built-in that does not return.
func stuckJob(release <-chan struct{}) func(*vm) (map[string]any, error) {
	return func(*vm) (map[string]any, error) {
		<-release
		return map[string]any{"late": true}, nil
	}
}

// TestStuckNativeCode: a call stuck in native code makes Run give up at
// twice the budget; its slot is given back at once, so the pool keeps its
// capacity while the worker is stuck, and the runtime is dropped when
// the worker finally returns.
func TestStuckNativeCode(t *testing.T) {
	const budget = 300 * time.Millisecond
	p := compileSource(t, "m.js", `export default () => ({ ok: true });`, "", Options{Timeout: budget, Runtimes: 1})
	release := make(chan struct{})
	_, err := p.supervise(context.Background(), nil, stuckJob(release))
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTimeout || !strings.Contains(e.Message, "did not stop") {
		t.Fatalf("stuck call = %v, want an abandonment timeout", err)
	}
	waitUntil(t, "the zombie is counted", func() bool { return p.pool.zombieCount() == 1 })
	// The only slot serves new calls while the first worker is stuck.
	for range 3 {
		if out, err := p.Run(context.Background(), Input{}); err != nil || out["ok"] != true {
			t.Fatalf("Run beside a stuck call = %v, %v", out, err)
		}
	}
	close(release)
	waitUntil(t, "the zombie ends", func() bool { return p.pool.zombieCount() == 0 && len(p.pool.slots) == 0 })
	p.pool.mu.Lock()
	idle := len(p.pool.idle)
	p.pool.mu.Unlock()
	if idle != 1 {
		t.Fatalf("%d idle runtimes, want 1 (the stuck one dropped)", idle)
	}
}

// TestRuntimeQueue: with every runtime busy, a caller queues for up to
// twelve budgets: it gets the runtime when a spinning call is stopped
// (after its budget of CPU time, or after ten budgets of wall-clock time
// on a starved CPU: with a queue of ten budgets, the queued call gave up
// first under -race on a loaded machine), and gives up when the calls
// holding the slots are stuck and the zombie allowance (one per slot) is
// used up.
func TestRuntimeQueue(t *testing.T) {
	const budget = 200 * time.Millisecond
	p := compileSource(t, "m.js", `export default (ctx) => {
  if (ctx.payload.spin) for (;;) {}
  return { ok: true };
};`, "", Options{Timeout: budget, Runtimes: 1})
	background := func(f func()) *sync.WaitGroup {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
		waitUntil(t, "the background call holds the slot", func() bool { return len(p.pool.slots) == 1 })
		return &wg
	}

	wg := background(func() { _, _ = p.Run(context.Background(), Input{Payload: map[string]any{"spin": true}}) })
	out, err := p.Run(context.Background(), Input{Payload: map[string]any{}})
	wg.Wait()
	if err != nil || out["ok"] != true {
		t.Fatalf("queued call = %v, %v; want it to run once the spinning call was stopped", out, err)
	}

	release := make(chan struct{})
	defer close(release)
	// abandoned: a zombie that gives its slot back
	_, _ = p.supervise(context.Background(), nil, stuckJob(release))
	waitUntil(t, "the zombie gave its slot back", func() bool { return p.pool.zombieCount() == 1 && len(p.pool.slots) == 0 })
	// abandoned beyond the allowance: keeps its slot
	_, _ = p.supervise(context.Background(), nil, stuckJob(release))
	waitUntil(t, "the second stuck call keeps its slot", func() bool { return len(p.pool.slots) == 1 })
	e := runErr(t, p, Input{Payload: map[string]any{}}, KindTimeout)
	if !strings.Contains(e.Message, "no runtime free") {
		t.Errorf("message %q", e.Message)
	}
}

// memoryGrowth runs f while sampling the Go runtime's mapped memory every
// millisecond and returns the peak growth over the starting point, and
// the growth of the process's peak RSS where Linux lets it be reset.
func memoryGrowth(t *testing.T, f func()) (goPeak, rssPeak int64) {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64() - sample[1].Value.Uint64())
	}
	base := read()
	rssBase := procStatus(t, "VmRSS")
	resetHWM := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if resetHWM && rssBase > 0 {
		rssPeak = procStatus(t, "VmHWM") - rssBase
	}
	return peak.Load(), rssPeak
}

// procStatus reads a kB field of /proc/self/status in bytes (0 if absent).
func procStatus(t *testing.T, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// TestMemoryBombs: memory bombs are stopped by the memory guard (the time
// budget is set far away so it cannot be what stops them) and the process
// grows by well under 256 MiB.
func TestMemoryBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of MiB")
	}
	const limit = 256 << 20
	tests := []struct {
		name, src string
		detail    string // substring of the message
	}{
		{"repeat 1e9", `export default () => ({ s: "x".repeat(1e9) });`, "String.prototype.repeat"},
		{"repeat caught", `export default () => { try { "x".repeat(1e9); } catch (e) { return { caught: String(e) }; } };`, "String.prototype.repeat"},
		{"growing array", `export default () => { const a = []; for (let i = 0; ; i++) a.push({ i, s: "item-" + i }); };`, "heap grew"},
		{"growing array of strings", `export default () => { const a = []; for (;;) a.push("x".repeat(64) + a.length); };`, "heap grew"},
		{"string doubling", `export default () => { let s = "x"; for (;;) s += s; };`, "heap grew"},
		{"doubling caught", `export default () => { let s = "x"; for (;;) { try { s += s; } catch (e) {} } };`, "heap grew"},
		{"object keys", `export default () => { const o = {}; for (let i = 0; ; i++) o["k" + i] = i; };`, "heap grew"},
		{"join aliasing", `export default () => Array(1e5).fill("x".repeat(1000)).join("")`, "Array.prototype.join"},
		{"stringify aliasing", `export default () => { let a = ["x".repeat(1000)]; for (let i = 0; i < 40; i++) a = [a, a]; return { s: JSON.stringify(a) }; };`, "JSON.stringify"},
		// one step of each built 545, 99 and 76 MiB before it was refused (issue 34)
		{"normalize", `export default () => ({ n: "\uFDFA".repeat(4e6).normalize("NFKD").length });`, "normalize"},
		{"toUpperCase", `export default () => ({ n: "\u0390".repeat(4e6).toUpperCase().length });`, "toUpperCase"},
		{"encodeURIComponent", `export default () => ({ n: encodeURIComponent("\u0800".repeat(4e6)).length });`, "encodeURIComponent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, "m.js", tc.src, "", Options{Timeout: 20 * time.Second})
			var e *Error
			var elapsed time.Duration
			goPeak, rssPeak := memoryGrowth(t, func() {
				start := time.Now()
				e = runErr(t, p, Input{}, KindMemory)
				elapsed = time.Since(start)
			})
			t.Logf("stopped after %v: %s; Go memory +%d MiB, peak RSS +%d MiB", elapsed.Round(time.Millisecond), e.Message, goPeak>>20, rssPeak>>20)
			if !strings.Contains(e.Message, tc.detail) {
				t.Errorf("message %q does not contain %q", e.Message, tc.detail)
			}
			if goPeak > limit || rssPeak > limit {
				t.Fatalf("memory grew by %d MiB (Go) / %d MiB (RSS), limit %d MiB", goPeak>>20, rssPeak>>20, limit>>20)
			}
		})
	}
}

// TestGuardsRefuse: every guarded built-in refuses an oversized result,
// and catching the RangeError does not let the script go on. MaxBytes is
// 1 MiB so the guards, not the 16 MiB allocation watchdog, are what stop
// each case.
func TestGuardsRefuse(t *testing.T) {
	tests := []struct {
		name, expr, detail string
		regexpHeavy        bool // the race detector inflates its allocations past the watchdog
	}{
		{"repeat", `"ab".repeat(5e6)`, "repeat", false},
		{"padStart", `"x".padStart(1e9)`, "padStart", false},
		{"padEnd", `"x".padEnd(9e6, "ab")`, "padEnd", false},
		{"concat", `"x".concat(...Array(100).fill("y".repeat(1e5)))`, "String.prototype.concat", false},
		{"replaceAll string", `"ab".repeat(1e5).replaceAll("a", "x".repeat(1000))`, "replace", false},
		{"replace dollar", `"a".repeat(1e4).replace(/a/g, "$\x60")`, "replace", false},
		{"replace function", `"a".repeat(3000).replace(/a/g, () => "y".repeat(1000))`, "replace", true},
		{"split", `"x".repeat(1e6).split("")`, "split", false},
		{"match", `"x".repeat(1e6).match(/x/g)`, "match", false},
		{"String.raw", `String.raw({ raw: Array(1000).fill("x".repeat(1e5)) })`, "String.raw", false},
		{"join", `Array(5e4).fill("x".repeat(1000)).join("")`, "join", false},
		{"toLocaleString", `Array(5e4).fill("x".repeat(1000)).toLocaleString()`, "join", false},
		{"template of array", "`${Array(5e4).fill(\"x\".repeat(1000))}`", "join", false},
		{"fill huge", `Array(1e9).fill(0)`, "fill", false},
		{"map huge sparse", `Array(1e9).map((x) => x)`, "map", false},
		{"indexOf huge sparse", `[].concat(Array(1e9)).indexOf(1)`, "concat", false},
		{"slice huge", `Array(4e9).slice()`, "slice", false},
		{"toSorted huge", `Array(1e8).toSorted()`, "toSorted", false},
		{"Array.from length", `Array.from({ length: 1e9 })`, "Array.from", false},
		{"Array.from sparse", `Array.from(Array(1e9))`, "Array.from", false},
		{"apply", `Math.max.apply(null, { length: 1e9 })`, "apply", false},
		{"Reflect.apply", `Reflect.apply(Math.max, null, Array(1e9))`, "Reflect.apply", false},
		{"Reflect.construct", `Reflect.construct(Array, Array(1e9))`, "Reflect.construct", false},
		{"concat spread", `[].concat(...Array(1000).fill(Array(1e4).fill(0)))`, "concat", false},
		{"flat aliasing", `(() => { let a = [1]; for (let i = 0; i < 40; i++) a = [a, a]; return a.flat(Infinity); })()`, "flat", false},
		{"stringify aliasing", `(() => { let a = ["x".repeat(100)]; for (let i = 0; i < 30; i++) a = [a, a]; return JSON.stringify(a); })()`, "JSON.stringify", false},
		{"stringify indent", `(() => { let a = [1]; for (let i = 0; i < 24; i++) a = [a, a]; return JSON.stringify(a, null, 10); })()`, "JSON.stringify", false},
		{"Object.keys string", `Object.keys("x".repeat(1e6))`, "Object.keys", false},
		{"Object.assign string", `Object.assign({}, "x".repeat(1e6))`, "Object.assign", false},
		{"fromCharCode.apply", `String.fromCharCode.apply(null, { length: 1e9 })`, "apply", false},
		{"new Array join", `new Array(1e9).join("x")`, "join", false},
		{"normalize", `"\uFDFA".repeat(1e5).normalize("NFKD")`, "normalize", false},
		{"normalize, composed form", `"\uFDFA".repeat(1e5).normalize("NFKC")`, "normalize", false},
		{"toUpperCase", `"\u0390".repeat(4e5).toUpperCase()`, "toUpperCase", false},
		{"toLocaleLowerCase", `"\u0130".repeat(6e5).toLocaleLowerCase()`, "toLocaleLowerCase", false},
		{"encodeURIComponent", `encodeURIComponent("\u0800".repeat(2e5))`, "encodeURIComponent", false},
		{"encodeURI", `encodeURI("\u0800".repeat(2e5))`, "encodeURI", false},
		{"escape", `escape("\u0800".repeat(2e5))`, "escape", false},
		{"stringify escapes", `JSON.stringify("\x01".repeat(2e5))`, "JSON.stringify", false},
		{"stringify escaped keys", `JSON.stringify({ ["\x01".repeat(2e5)]: 1 })`, "JSON.stringify", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.regexpHeavy && raceEnabled {
				t.Skip("regexp allocations under -race trip the allocation watchdog first")
			}
			src := "export default () => { try { const v = " + tc.expr + "; return { len: v.length }; } catch (e) { for (let i = 0; i < 1e5; i++); return { caught: String(e) }; } };"
			p := compileSource(t, "m.js", src, "", Options{Timeout: 10 * time.Second, MaxBytes: 1 << 20})
			e := runErr(t, p, Input{}, KindMemory)
			if !strings.Contains(e.Message, tc.detail) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.detail)
			}
		})
	}
}

// TestGuardsNesting: recursion that built-ins do in Go is bounded.
func TestGuardsNesting(t *testing.T) {
	tests := []struct{ name, expr string }{
		{"deep JSON.parse", `JSON.parse("[".repeat(100000) + "]".repeat(100000))`},
		{"deep join", `(() => { let a = [1]; for (let i = 0; i < 5000; i++) a = [a]; return String(a); })()`},
		{"deep stringify", `(() => { let a = [1]; for (let i = 0; i < 5000; i++) a = [a]; return JSON.stringify(a); })()`},
		{"deep flat", `(() => { let a = [1]; for (let i = 0; i < 5000; i++) a = [a]; return a.flat(Infinity); })()`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := compileSource(t, "m.js", "export default () => { const v = "+tc.expr+"; return { v: typeof v }; };", "", Options{Timeout: 10 * time.Second})
			e := runErr(t, p, Input{}, KindThrow)
			if !strings.Contains(e.Message, "RangeError") || !strings.Contains(e.Message, "nesting deeper than") {
				t.Fatalf("message %q", e.Message)
			}
		})
	}
}
