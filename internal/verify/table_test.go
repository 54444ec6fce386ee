package verify

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/providers.md")

// TestMarkdownTable keeps testdata/providers.md (embedded by the README)
// equal to the registry; go test -run TestMarkdownTable -update rewrites it.
func TestMarkdownTable(t *testing.T) {
	got := MarkdownTable()
	path := filepath.Join("testdata", "providers.md")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s is out of date: go test ./internal/verify -run TestMarkdownTable -update", path)
	}
	if n := strings.Count(got, "\n") - 2; n != len(all()) {
		t.Fatalf("%d rows for %d providers", n, len(all()))
	}
	for _, p := range all() {
		if !strings.Contains(got, "| `"+p.Name+"` |") {
			t.Errorf("no row for %s", p.Name)
		}
	}
}
