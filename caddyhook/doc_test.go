package caddyhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/optdoc"
)

// handlerDoc returns the doc comment of the Handler type.
func handlerDoc(t *testing.T, fset *token.FileSet) string {
	t.Helper()
	f, err := parser.ParseFile(fset, "handler.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			if ts := g.Specs[0].(*ast.TypeSpec); ts.Name.Name == "Handler" && g.Doc != nil {
				return g.Doc.Text()
			}
		}
	}
	t.Fatal("no doc comment on Handler")
	return ""
}

// TestHandlerDocIsComplete: the Handler's doc shows every subdirective the
// Caddyfile parser accepts (the hooks block, mapping, spool and events
// blocks), every placeholder the handler sets and the Caddy event it
// emits. On main the doc lacked the placeholders, the event and seven
// subdirectives (mapping, presets, cel_cost_limit, transforms_root,
// transforms_dir, transform_timeout, transform_max_memory).
func TestHandlerDocIsComplete(t *testing.T) {
	fset := token.NewFileSet()
	doc := handlerDoc(t, fset)
	blocks, err := optdoc.ParserOptions(".")
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, b := range []string{"hooks", "spool", "events", "mapping"} {
		words = append(words, blocks[b]...)
	}
	if len(words) < 50 {
		t.Fatalf("only %d subdirectives found: %v", len(words), words)
	}
	for _, w := range words {
		if !regexp.MustCompile(`(^|[^a-z_])` + regexp.QuoteMeta(w) + `([^a-z_]|$)`).MatchString(doc) {
			t.Errorf("the Handler doc does not show the Caddyfile word %q", w)
		}
	}
	for _, p := range []string{placeholderRoute, placeholderMapping, placeholderStatus, placeholderReason, placeholderEvent} {
		if !strings.Contains(doc, "{"+p+"}") {
			t.Errorf("the Handler doc does not list the placeholder {%s}", p)
		}
	}
	if !strings.Contains(doc, lockoutEventName) {
		t.Errorf("the Handler doc does not name the event %s", lockoutEventName)
	}
}
