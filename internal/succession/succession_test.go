package succession

import (
	"slices"
	"testing"
)

// TestLine walks a reload's life: the oldest registration applies; a
// newer one that goes away (a refused reload) never applied; when the
// oldest goes, the next one applies; when the last goes, empty is
// called; refuse keeps a conflicting value out; Release twice is
// harmless.
func TestLine(t *testing.T) {
	var applied []string
	emptied := 0
	l := New(func(v string) { applied = append(applied, v) }, func() { emptied++ })
	step := func(name string, want []string, wantEmpty int) {
		t.Helper()
		if !slices.Equal(applied, want) || emptied != wantEmpty {
			t.Fatalf("%s: applied %v, emptied %d; want %v, %d", name, applied, emptied, want, wantEmpty)
		}
	}
	running := l.Register("running", nil)
	step("first registration", []string{"running"}, 0)
	if r := l.Register("again", func(v string) bool { return v == "running" }); r != nil {
		t.Fatal("a refused value was registered")
	}
	refused := l.Register("refused", nil)
	step("a newer one", []string{"running"}, 0)
	refused.Release()
	step("the newer one goes", []string{"running"}, 0)
	next := l.Register("next", nil)
	running.Release()
	step("the oldest goes", []string{"running", "next"}, 0)
	running.Release()
	step("released twice", []string{"running", "next"}, 0)
	if l.Len() != 1 || next.Value() != "next" {
		t.Fatalf("len %d, value %q", l.Len(), next.Value())
	}
	next.Release()
	step("the last goes", []string{"running", "next"}, 1)
	l.Register("again", nil)
	step("registered again", []string{"running", "next", "again"}, 1)
}

// TestLineNilEmpty: a line without an empty callback lets the last
// registration go quietly.
func TestLineNilEmpty(t *testing.T) {
	l := New(func(int) {}, nil)
	l.Register(1, nil).Release()
	if l.Len() != 0 {
		t.Fatal("not empty")
	}
}
