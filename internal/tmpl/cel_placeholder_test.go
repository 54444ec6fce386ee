package tmpl

import (
	"strings"
	"testing"
	"unicode"
)

// compiledCEL reports how Compile reads src: whether it compiles, and
// whether its parts include a CEL placeholder.
func compiledCEL(t *testing.T, src string, env *Env) (ok, cel bool) {
	t.Helper()
	tp, err := Compile(src, env)
	if err != nil {
		return false, false
	}
	for _, p := range tp.parts {
		if p.kind == partCEL {
			return true, true
		}
	}
	return true, false
}

// TestUsesCELReadsAsCompile is the property behind issue 34 item B12:
// UsesCEL, which the importer's refusal uses, reads a template as Compile
// does, whatever character stands between "{{" and "cel:" or around it.
// For every character of the Basic Multilingual Plane and the astral
// white space and format characters, in several placements, a template
// Compile runs as CEL is one UsesCEL reports, and one Compile runs
// without CEL is one it does not (the importer's old check, which removed
// ASCII spaces only, missed tab, NBSP, U+3000 and the other white space).
// Placeholder reads the same placeholders, ending where Compile does.
func TestUsesCELReadsAsCompile(t *testing.T) {
	env, err := NewEnv(0)
	if err != nil {
		t.Fatal(err)
	}
	shapes := []func(w string) string{
		func(w string) string { return "{{" + w + "cel: 1 }}" },
		func(w string) string { return "a {{ payload.x }} {{" + w + w + "cel:'}}' }}" },
		func(w string) string { return "{{ " + w + " cel: 1 }}" },
		func(w string) string { return "{{" + w + "cel : 1 }}" },
		func(w string) string { return "{{ cel" + w + ": 1 }}" },
	}
	var runes []rune
	for r := rune(0); r < 0x10000; r++ {
		runes = append(runes, r)
	}
	for r := rune(0x10000); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) || unicode.In(r, unicode.Zs, unicode.Cf) {
			runes = append(runes, r)
		}
	}
	checked := 0
	for _, r := range runes {
		if r >= 0xD800 && r <= 0xDFFF || r == '{' || r == '}' {
			continue
		}
		for _, shape := range shapes {
			src := shape(string(r))
			ok, cel := compiledCEL(t, src, nil) // without an environment a CEL placeholder fails
			if !ok {
				ok, cel = compiledCEL(t, src, env)
			}
			if !ok {
				continue // Compile refuses it: nothing runs
			}
			checked++
			if UsesCEL(src) != cel {
				t.Fatalf("%q (U+%04X): Compile reads CEL %v, UsesCEL %v", src, r, cel, !cel)
			}
			// the last placeholder is the one in question: as CEL it closes
			// src (past the "}}" in its string literal), else at its first "}}"
			if last := strings.LastIndex(src, "{{"); last >= 0 {
				want := len(src)
				if !cel {
					want = last + 2 + strings.Index(src[last+2:], "}}") + 2
				}
				if end, pc := Placeholder(src, last); end != want || pc != cel {
					t.Fatalf("Placeholder(%q, %d) = %d, %v; want %d, %v", src, last, end, pc, want, cel)
				}
			}
		}
	}
	if checked < 60000 {
		t.Fatalf("only %d templates compiled", checked)
	}
	for _, src := range []string{"{{\tcel: 1 }}", "{{\u00a0cel: 1 }}", "{{\u3000cel: 1 }}"} {
		if _, cel := compiledCEL(t, src, env); !cel || !UsesCEL(src) {
			t.Errorf("%q: Compile reads CEL %v, UsesCEL %v; want both", src, cel, UsesCEL(src))
		}
	}
}
