package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// TestReferenceIsGenerated: docs/reference.md is what the generator
// writes from the code as it is, so a new option, or a changed comment,
// shows in the reference.
func TestReferenceIsGenerated(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, referencePage))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	line := 0
	for line < len(gl) && line < len(wl) && gl[line] == wl[line] {
		line++
	}
	at := func(l []string) string {
		if line < len(l) {
			return l[line]
		}
		return "(end of page)"
	}
	t.Fatalf("%s is not what the code generates; run `%s` from the repository root.\nfirst difference, line %d:\ncommitted: %s\ngenerated: %s",
		referencePage, Command, line+1, at(gl), at(wl))
}

// TestProvidersTableIsGenerated (issue 29): the providers table of
// docs/providers.md is the registry's (verify.MarkdownTable), every
// provider in it.
func TestProvidersTableIsGenerated(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := ProvidersPage(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, providersPage))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the providers table of %s is not the registry's; run `%s` from the repository root", providersPage, Command)
	}
	for _, name := range verify.Names() {
		if !strings.Contains(string(got), "| `"+name+"` |") {
			t.Errorf("%s: no row for %s", providersPage, name)
		}
	}
}

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"default hook:<uuid>", "default hook:&lt;uuid&gt;"},
		{"not {env.*}, not {file.*}", `not {env.\*}, not {file.\*}`},
		{"a|b and `x|<y>`", "a\\|b and `x\\|<y>`"},
		{"returned as [Result.DeliveryID].", "returned as Result.DeliveryID."},
		{`["*"] = any, [] = none, [<id>...]`, `["\*"] = any, [] = none, [&lt;id&gt;...]`},
		{"R&D", "R&amp;D"},
	} {
		if got := escape(c.in); got != c.want {
			t.Errorf("escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestWithConsts(t *testing.T) {
	consts := map[string]string{"MaxSecrets": "8", "DefaultTolerance": "5m0s"}
	got := withConsts("1 to MaxSecrets; 0 means DefaultTolerance; MaxSecretsX stays", consts)
	if want := "1 to 8; 0 means 5m0s; MaxSecretsX stays"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
