package tmpl

import (
	"maps"
	"testing"
)

// TestElementSameAsCopy: rendering with Vars.Element gives exactly what
// rendering against a copied payload with the key replaced gives.
func TestElementSameAsCopy(t *testing.T) {
	env, err := NewEnv(0)
	if err != nil {
		t.Fatal(err)
	}
	payload := map[string]any{
		"source":   "gmail",
		"messages": []any{map[string]any{"id": "a", "n": 1.0}, map[string]any{"id": "b", "n": 2.0}},
		"other":    map[string]any{"k": "v"},
	}
	srcs := []string{
		"{{messages[0].id}} {{payload.messages[0].n}} {{messages[1].id}} {{other.k}} {{source}}",
		"{{ cel: payload.messages[0].id }} {{ cel: size(payload.messages) }} {{ cel: size(payload) }}",
		`{{ cel: "messages" in payload }} {{ cel: has(payload.messages) }} {{ cel: payload.other.k }}`,
		"{{ cel: payload }}", "{{ cel: payload.messages }}", `{{ cel: payload.filter(k, k == "messages").size() }} {{ cel: payload.exists(k, k == "absent") }}`,
		`{{ cel: payload == {"x": 1} }} {{ cel: payload.?messages.orValue([]).size() }}`,
		`{{ cel: payload.messages.map(m, m.id).join(",") }}`,
	}
	for _, src := range srcs {
		tpl, err := Compile(src, env)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		for i, item := range payload["messages"].([]any) {
			for _, key := range []string{"messages", "absent"} {
				copied := maps.Clone(payload)
				copied[key] = []any{item}
				want, err := tpl.RenderString(&Vars{Payload: copied})
				if err != nil {
					t.Fatalf("%s on a copy: %v", src, err)
				}
				got, err := tpl.RenderString(&Vars{Payload: payload, Element: Element{Key: key, Value: []any{item}}})
				if err != nil || got != want {
					t.Errorf("%s, element %d of %s: %q, %v; want %q", src, i, key, got, err, want)
				}
			}
		}
	}
}
