package testkit

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestEventually: true as soon as cond holds; false once the timeout has
// passed without it.
func TestEventually(t *testing.T) {
	var n atomic.Int32
	if !Eventually(PollTimeout, func() bool { return n.Add(1) == 3 }) || n.Load() != 3 {
		t.Fatalf("calls %d", n.Load())
	}
	if Eventually(5*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
}

type members int

func (m members) Members() int { return int(m) }

// TestWaitMembers: returns once every node sees the count.
func TestWaitMembers(t *testing.T) {
	WaitMembers(t, 2, members(2), members(2))
}

func TestSameSet(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		want bool
	}{
		{nil, nil, true},
		{[]string{"a", "b"}, []string{"b", "a"}, true},
		{[]string{"a", "a"}, []string{"a", "b"}, false},
		{[]string{"a"}, []string{"a", "a"}, false},
		{[]string{"a", "b"}, []string{"a", "c"}, false},
	} {
		if got := SameSet(tc.a, tc.b); got != tc.want {
			t.Errorf("SameSet(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}

// TestJSONObjects: the matching objects in document order, at any depth,
// not searched inside.
func TestJSONObjects(t *testing.T) {
	v := map[string]any{"a": []any{map[string]any{"handler": "hooks", "n": 1, "inner": map[string]any{"handler": "hooks"}}},
		"b": map[string]any{"x": map[string]any{"handler": "hooks", "n": 2}}, "c": "hooks"}
	got := JSONObjects(v, func(m map[string]any) bool { return m["handler"] == "hooks" })
	if len(got) != 2 || got[0]["n"] != 1 || got[1]["n"] != 2 {
		t.Fatalf("%v", got)
	}
}

// TestSourceHash: the hash follows what the build reads (a source file)
// and not what it does not (a test file, a document).
func TestSourceHash(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("a/a.go", "package a\n")
	hash := func() string {
		t.Helper()
		h, err := sourceHash(root)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := hash()
	write("a/a_test.go", "package a\n")
	write("README.md", "x")
	write("a/testdata/x.json", "{}")
	write(".cache/x", "x")
	if hash() != before {
		t.Fatal("a test, a document or a cache changed the hash")
	}
	write("a/a.go", "package a // changed\n")
	if hash() == before {
		t.Fatal("a changed source kept the hash")
	}
}
