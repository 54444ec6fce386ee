package optdoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Package is what the documentation needs of one Go package: its struct
// types with their fields' doc comments, and the doc comments of its
// functions and methods.
type Package struct {
	Types map[string]*Type
	// Funcs are the doc comments of functions ("name") and methods
	// ("Type.name").
	Funcs map[string]string
	// Consts are the values of the exported constants that are a literal
	// ("16") or a literal times a time unit (written as a duration, "5m0s").
	Consts map[string]string
}

// Type is one struct type.
type Type struct {
	Name   string
	Doc    string
	Fields []Field
}

// Field is one field of a struct type.
type Field struct {
	Name string // the Go name
	JSON string // the name in its json tag ("" when it has none, "-" when skipped)
	// Doc is the field's doc comment; a field without one shares the doc
	// of the field on the line above it (`// Cert and Key are …`).
	Doc string
}

// Field returns the field named name.
func (t *Type) Field(name string) (Field, bool) {
	i := slices.IndexFunc(t.Fields, func(f Field) bool { return f.Name == name })
	if i < 0 {
		return Field{}, false
	}
	return t.Fields[i], true
}

// ReadPackage reads the non-test Go files of dir.
func ReadPackage(dir string) (*Package, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &Package{Types: map[string]*Type{}, Funcs: map[string]string{}, Consts: map[string]string{}}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				key := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					key = recvName(d.Recv.List[0].Type) + "." + key
				}
				p.Funcs[key] = d.Doc.Text()
			case *ast.GenDecl:
				if d.Tok == token.CONST {
					for _, spec := range d.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) && n.IsExported() {
								if v, ok := constValue(vs.Values[i]); ok {
									p.Consts[n.Name] = v
								}
							}
						}
					}
				}
				if d.Tok != token.TYPE {
					continue
				}
				for _, spec := range d.Specs {
					ts := spec.(*ast.TypeSpec)
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					doc := ts.Doc
					if doc == nil && len(d.Specs) == 1 {
						doc = d.Doc
					}
					p.Types[ts.Name.Name] = &Type{Name: ts.Name.Name, Doc: doc.Text(), Fields: fields(fset, st)}
				}
			}
		}
	}
	return p, nil
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// fields lists a struct's named fields with their json names and docs.
func fields(fset *token.FileSet, st *ast.StructType) []Field {
	var out []Field
	prevLine, prevDoc := -2, ""
	for _, f := range st.Fields.List {
		line := fset.Position(f.Pos()).Line
		doc := f.Doc.Text()
		if doc == "" && line == prevLine+1 {
			doc = prevDoc
		}
		prevLine, prevDoc = fset.Position(f.End()).Line, doc
		tag := ""
		if f.Tag != nil {
			if s, err := strconv.Unquote(f.Tag.Value); err == nil {
				tag, _, _ = strings.Cut(reflect.StructTag(s).Get("json"), ",")
			}
		}
		for _, n := range f.Names {
			out = append(out, Field{Name: n.Name, JSON: tag, Doc: doc})
		}
	}
	return out
}

// timeUnits are the time package's units a constant may be a multiple of.
var timeUnits = map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}

// constValue is a constant's value as the documentation shows it: a
// literal as written, n * time.Unit as a duration.
func constValue(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind == token.INT || x.Kind == token.FLOAT {
			return x.Value, true
		}
	case *ast.BinaryExpr:
		lit, ok := x.X.(*ast.BasicLit)
		sel, ok2 := x.Y.(*ast.SelectorExpr)
		if !ok || !ok2 || x.Op != token.MUL || lit.Kind != token.INT {
			return "", false
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "time" {
			return "", false
		}
		unit, ok := timeUnits[sel.Sel.Name]
		n, err := strconv.Atoi(lit.Value)
		if !ok || err != nil {
			return "", false
		}
		return (time.Duration(n) * unit).String(), true
	}
	return "", false
}
