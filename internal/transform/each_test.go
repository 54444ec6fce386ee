package transform

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// eachModule reports what it sees of the payload and changes it, so
// that a later element would notice a change leaking from an earlier one.
const eachModule = `export default (ctx) => {
  const p = ctx.payload;
  const seen = {
    item: p.items[0].id, n: p.items.length, other: p.other, keys: Object.keys(p).join(","),
    json: JSON.stringify(p), spread: Object.keys({ ...p }).length, has: "items" in p && !("zzz" in p),
    hasOwn: Object.prototype.hasOwnProperty.call(p, "items"), extra: p.extra, mark: p.nested.mark,
  };
  p.extra = "set by " + seen.item;
  delete p.other;
  Object.defineProperty(p, "hidden", { value: 1 });
  p.nested.mark = (p.nested.mark || "") + seen.item;
  if (p.items[0].id === "skip") return null;
  return seen;
};`

// TestRunEachMatchesShallowCopies: each element sees what the gateway's
// {...payload, [key]: [item]} shows it; top-level changes stay with the
// element, nested ones are shared, as with a shallow copy.
func TestRunEachMatchesShallowCopies(t *testing.T) {
	p := compileSource(t, "m.js", eachModule, "", Options{})
	items := []any{map[string]any{"id": "a"}, map[string]any{"id": "skip"}, map[string]any{"id": "b"}}
	payload := map[string]any{"other": 1.0, "items": items, "nested": map[string]any{}}
	got, err := p.RunEach(context.Background(), Input{Payload: payload}, "items", items)
	if err != nil {
		t.Fatal(err)
	}
	// The reference: one Run per element on a real shallow copy, sharing
	// one nested object as the copies would.
	var want []map[string]any
	for i, it := range items {
		c := maps.Clone(payload)
		c["items"] = []any{it}
		c["nested"] = []map[string]any{{}, {"mark": "a"}, {"mark": "askip"}}[i]
		out, err := p.Run(context.Background(), Input{Payload: c})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RunEach = %v\nwant     %v", got, want)
	}
	if got[1] != nil {
		t.Fatalf("null did not skip: %v", got[1])
	}
}

// TestRunEachStopsAtFailure: the first failing element ends the loop with
// the results before it; every element has its own time budget.
func TestRunEachStopsAtFailure(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => {
  const it = ctx.payload.items[0];
  if (it === "spin") for (;;) {}
  if (it === "throw") throw new Error("bad element");
  return { it };
};`, "", Options{Timeout: 50 * time.Millisecond})
	items := []any{"a", "b", "throw", "c"}
	got, err := p.RunEach(context.Background(), Input{Payload: map[string]any{"items": items}}, "items", items)
	var e *Error
	if len(got) != 2 || !asError(err, &e) || e.Kind != KindThrow {
		t.Fatalf("RunEach = %v, %v; want 2 results and the throw", got, err)
	}
	items = []any{"a", "spin", "b"}
	got, err = p.RunEach(context.Background(), Input{Payload: map[string]any{"items": items}}, "items", items)
	if len(got) != 1 || !asError(err, &e) || e.Kind != KindTimeout {
		t.Fatalf("RunEach = %v, %v; want 1 result and a timeout", got, err)
	}
	// Ten elements of 30ms each fit their own 50ms budgets, not one shared.
	p = compileSource(t, "m.js", `export default () => { const end = Date.now() + 30; while (Date.now() < end); return {}; };`, "",
		Options{Timeout: 5 * time.Second})
	items = make([]any, 10)
	if got, err := p.RunEach(context.Background(), Input{Payload: map[string]any{"items": items}}, "items", items); err != nil || len(got) != 10 {
		t.Fatalf("RunEach = %d results, %v", len(got), err)
	}
}

// asError is errors.As for *Error.
func asError(err error, e **Error) bool {
	te, ok := err.(*Error)
	*e = te
	return ok
}

// TestRunEachCostFollowsTheList reproduces issue 17 item 12 for
// transforms: a payload padded with many top-level keys costs one
// conversion, not one per element. Measured in bytes allocated, which a
// busy machine does not change: 100 elements over a padded payload
// allocate less than 5 single calls on it would.
func TestRunEachCostFollowsTheList(t *testing.T) {
	p := compileSource(t, "m.js", `export default (ctx) => ({ id: ctx.payload.messages[0].id });`, "", Options{Timeout: 10 * time.Second})
	payload := map[string]any{}
	for i := range 50000 {
		payload[fmt.Sprintf("pad%d", i)] = "x"
	}
	msgs := make([]any, 100)
	for i := range msgs {
		msgs[i] = map[string]any{"id": fmt.Sprint(i)}
	}
	payload["messages"] = msgs
	allocs := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	one := allocs(func() {
		if _, err := p.Run(context.Background(), Input{Payload: payload}); err != nil {
			t.Fatal(err)
		}
	})
	var got []map[string]any
	each := allocs(func() {
		var err error
		if got, err = p.RunEach(context.Background(), Input{Payload: payload}, "messages", msgs); err != nil {
			t.Fatal(err)
		}
	})
	if len(got) != 100 || got[99]["id"] != "99" {
		t.Fatalf("results %d, last %v", len(got), got[len(got)-1])
	}
	t.Logf("one call: %d KiB; 100 elements: %d KiB (%.1f calls' worth)", one>>10, each>>10, float64(each)/float64(one))
	if each > 5*one {
		t.Fatalf("100 elements allocated %d bytes, %.1f times one call", each, float64(each)/float64(one))
	}
}
