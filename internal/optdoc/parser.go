// Package optdoc reads caddyhook's configuration options from its source,
// so that the documentation and the tests have one list: the
// subdirectives each Caddyfile parser function reads (ParserOptions), and
// the doc comments of the config types' fields (Fields). It parses the
// source with go/parser and imports nothing of the handler.
package optdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// ParserBlocks names the Caddyfile block each parser function reads the
// subdirectives of (package.function; the method of another directive's
// type: package.Type.function).
var ParserBlocks = map[string]string{
	"caddyhook.unmarshalOption":            "hooks",
	"caddyhook.unmarshalSpool":             "spool",
	"caddyhook.unmarshalClusterSpool":      "spool",
	"caddyhook.unmarshalUnauthBodies":      "unauthenticated_bodies",
	"caddyhook.unmarshalMappingOption":     "mapping",
	"caddyhook.unmarshalTransformRef":      "transform",
	"caddyhook.unmarshalVerify":            "verify",
	"caddyhook.unmarshalEvents":            "events",
	"caddyhook.Console.UnmarshalCaddyfile": "hooks_console",
	"natscluster.UnmarshalCaddyfile":       "cluster",
}

// registryBlocks are the blocks whose parser reads its words from a
// table rather than from cases the source spells out: the verify block
// (verify.Words, applied by verify.Config.SetWord).
var registryBlocks = map[string]func() []string{
	"verify": func() []string {
		words := verify.Words()
		out := make([]string, 0, len(words))
		for _, w := range words {
			out = append(out, w.Name)
		}
		return out
	},
}

// parserValues are strings the parsers compare the current token with that
// are values of a directive, not subdirectives (`events off`).
var parserValues = map[string]bool{"events.on": true, "events.off": true}

// OptionName is what a Caddyfile subdirective looks like.
var OptionName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ParserOptions reads the subdirectives the Caddyfile parsers accept from
// their source, by block (in the order the source compares them): in
// every function of the handler's package (dir) and of its NATS engine
// (dir/cluster/natscluster) that takes a *caddyfile.Dispenser, the string
// cases of a switch on d.Val() (or on name), the name == "…" cases of a
// switch without a tag, d.Val() (or name) compared with a string in an
// if, and the keys of map literals. A parser function whose block
// ParserBlocks does not name is an error.
func ParserOptions(dir string) (map[string][]string, error) {
	out := map[string][]string{}
	var unnamed []string
	for _, d := range []string{dir, filepath.Join(dir, "cluster", "natscluster")} {
		files, err := filepath.Glob(filepath.Join(d, "*.go"))
		if err != nil {
			return nil, err
		}
		slices.Sort(files)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				return nil, err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil || !takesDispenser(fn) {
					continue
				}
				opts := switchedOptions(fn.Body)
				if len(opts) == 0 {
					continue
				}
				name := f.Name.Name + "." + fn.Name.Name
				if fn.Recv != nil && len(fn.Recv.List) == 1 {
					if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
						if id, ok := star.X.(*ast.Ident); ok && id.Name != "Handler" && id.Name != "NATS" {
							name = f.Name.Name + "." + id.Name + "." + fn.Name.Name // another directive's parser
						}
					}
				}
				block, ok := ParserBlocks[name]
				if !ok {
					unnamed = append(unnamed, fmt.Sprintf("%s reads the subdirectives %v", name, opts))
					continue
				}
				for _, o := range opts {
					if !parserValues[block+"."+o] && !slices.Contains(out[block], o) {
						out[block] = append(out[block], o)
					}
				}
			}
		}
	}
	if len(unnamed) > 0 {
		return out, fmt.Errorf("parser functions without a block in optdoc.ParserBlocks: %s", strings.Join(unnamed, "; "))
	}
	for block, words := range registryBlocks {
		for _, o := range words() {
			if !slices.Contains(out[block], o) {
				out[block] = append(out[block], o)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Caddyfile parser functions found in %s", dir)
	}
	return out, nil
}

// takesDispenser reports a function with a *caddyfile.Dispenser parameter.
func takesDispenser(fn *ast.FuncDecl) bool {
	for _, p := range fn.Type.Params.List {
		if star, ok := p.Type.(*ast.StarExpr); ok {
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Dispenser" {
				return true
			}
		}
	}
	return false
}

// switchedOptions collects the option names a parser function compares
// the current token with (in a switch, or an if).
func switchedOptions(body *ast.BlockStmt) []string {
	var out []string
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && OptionName.MatchString(s) && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	isToken := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name == "name"
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			return ok && sel.Sel.Name == "Val"
		}
		return false
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SwitchStmt:
			for _, s := range x.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					switch {
					case x.Tag != nil && isToken(x.Tag):
						add(e)
					case x.Tag == nil:
						if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.EQL && isToken(b.X) {
							add(b.Y)
						}
					}
				}
			}
		case *ast.IfStmt:
			if b, ok := x.Cond.(*ast.BinaryExpr); ok && (b.Op == token.EQL || b.Op == token.NEQ) && isToken(b.X) {
				add(b.Y)
			}
		case *ast.CompositeLit:
			if m, ok := x.Type.(*ast.MapType); ok {
				if k, ok := m.Key.(*ast.Ident); ok && k.Name == "string" {
					for _, el := range x.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							add(kv.Key)
						}
					}
				}
			}
		}
		return true
	})
	return out
}
