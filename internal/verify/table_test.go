package verify

import (
	"strings"
	"testing"
)

// TestMarkdownTable: the table has one row per provider (docs/providers.md
// embeds it: internal/docgen writes it there, and its test keeps it equal).
func TestMarkdownTable(t *testing.T) {
	got := MarkdownTable()
	if n := strings.Count(got, "\n") - 2; n != len(all()) {
		t.Fatalf("%d rows for %d providers", n, len(all()))
	}
	for _, p := range all() {
		if !strings.Contains(got, "| `"+p.Name+"` |") {
			t.Errorf("no row for %s", p.Name)
		}
	}
}
