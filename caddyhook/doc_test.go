package caddyhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
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

// caddyfileWords returns the string literals the Caddyfile parser compares
// a subdirective (or its value) with in the named functions of the
// package: the cases of their switches and the keys of their map literals.
func caddyfileWords(t *testing.T, fset *token.FileSet, funcs ...string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var decls []ast.Decl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	var words []string
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				words = append(words, s)
			}
		}
	}
	seen := 0
	for _, d := range decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || !slices.Contains(funcs, fd.Name.Name) {
			continue
		}
		seen++
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				for _, e := range n.List {
					add(e)
				}
			case *ast.KeyValueExpr:
				add(n.Key)
			}
			return true
		})
	}
	if seen != len(funcs) {
		t.Fatalf("found %d of the functions %v", seen, funcs)
	}
	return words
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
	words := caddyfileWords(t, fset, "unmarshalOption", "unmarshalSpool", "unmarshalEvents", "unmarshalMappingOption")
	if len(words) < 50 {
		t.Fatalf("only %d subdirectives found: %v", len(words), words)
	}
	for _, w := range words {
		if !regexp.MustCompile(`(^|[^a-z_])` + regexp.QuoteMeta(w) + `([^a-z_]|$)`).MatchString(doc) {
			t.Errorf("the Handler doc does not show the Caddyfile word %q", w)
		}
	}
	for _, p := range []string{placeholderRoute, placeholderMapping, placeholderStatus, placeholderReason} {
		if !strings.Contains(doc, "{"+p+"}") {
			t.Errorf("the Handler doc does not list the placeholder {%s}", p)
		}
	}
	if !strings.Contains(doc, lockoutEventName) {
		t.Errorf("the Handler doc does not name the event %s", lockoutEventName)
	}
}
