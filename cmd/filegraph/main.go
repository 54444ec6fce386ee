// Command filegraph measures how the files of one Go package use each
// other: the numbers ARCHITECTURE.md's before/after table gives for
// caddyhook/.
//
//	go run ./cmd/filegraph [-v] [-entry ServeHTTP] ./caddyhook
//
// The package's non-test files are type-checked (with the export data of
// `go list -export`). File A uses file B when an identifier in A resolves
// to something declared in B: a package-level function, type, variable or
// constant, a method, or a struct field. It prints:
//
//   - receiver methods of the type named by -type (default Handler) and
//     the files that hold them;
//   - arrows: distinct pairs A→B (A ≠ B);
//   - mutual pairs: A→B and B→A;
//   - the largest reference cycle (strongly connected component), in files;
//   - field reaches: selections x.f, in one file, of a field f of a struct
//     type declared in another file (a keyed composite literal is not
//     one), by type; and of those, the reaches into another concern: the
//     type has methods (it is a concern, not a record) and the file
//     holds none of them (with -concerns, only the types named there).
//     With -fields, each reach into another concern, (file, type.field)
//     and its count;
//   - arrows running back up, against the request's direction: the files
//     are walked depth first from the file declaring the -entry method (the
//     request's way in), each file's arrows in the order of their first use
//     in its source, then from the files not reached, by name; an arrow to
//     a file still on the walk's path (one the request came through to get
//     here) runs back up. Floors are the longest path from the top over the
//     other arrows.
//
// With -v it lists the arrows running back up and the mutual pairs.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list the arrows running back up and the mutual pairs")
	fields := flag.Bool("fields", false, "list the field reaches into another concern")
	concerns := flag.String("concerns", "", "comma-separated concern types (default: every type with methods)")
	entry := flag.String("entry", "ServeHTTP", "the method whose file is the request's way in")
	typeName := flag.String("type", "Handler", "the type whose methods are counted")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	var only map[string]bool
	if *concerns != "" {
		only = map[string]bool{}
		for t := range strings.SplitSeq(*concerns, ",") {
			only[strings.TrimSpace(t)] = true
		}
	}
	if err := run(os.Stdout, dir, *entry, *typeName, *verbose, *fields, only); err != nil {
		fmt.Fprintln(os.Stderr, "filegraph:", err)
		os.Exit(1)
	}
}

// graph is the file-use graph of a package.
type graph struct {
	files []string            // base names, sorted
	out   map[string][]string // arrows, in the order of first use
}

func run(w io.Writer, dir, entry, typeName string, verbose, listFields bool, only map[string]bool) error {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	if len(pkgs) != 1 {
		return fmt.Errorf("%s: want one package, have %d", dir, len(pkgs))
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return fset.File(files[i].Pos()).Name() < fset.File(files[j].Pos()).Name() })
	exports, err := exportData(dir)
	if err != nil {
		return err
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return err
	}
	fileOf := func(p token.Pos) string { return filepath.Base(fset.File(p).Name()) }

	// the struct type each field belongs to, by the field's position
	owner := map[token.Pos]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, fl := range st.Fields.List {
					for _, nm := range fl.Names {
						owner[nm.Pos()] = ts.Name.Name
					}
				}
			}
			return true
		})
	}
	reaches := map[string]int{} // "file → Type.field", into another concern
	byType := map[string]int{}
	methodFiles := map[string]map[string]bool{} // type → files holding its methods
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				t := recvName(fd.Recv.List[0].Type)
				if methodFiles[t] == nil {
					methodFiles[t] = map[string]bool{}
				}
				methodFiles[t][fileOf(fd.Pos())] = true
			}
		}
	}
	type reach struct{ file, typ, field string }
	var allReaches []reach

	g := graph{out: map[string][]string{}}
	entryFile := ""
	methods := map[string]int{}
	for _, f := range files {
		name := fileOf(f.Pos())
		g.files = append(g.files, name)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			if recvName(fd.Recv.List[0].Type) == typeName {
				methods[name]++
				if fd.Name.Name == entry {
					entryFile = name
				}
			}
		}
		// uses in source order, so that the walk follows the first use
		type use struct {
			pos  token.Pos
			file string
		}
		var uses []use
		add := func(id *ast.Ident, obj types.Object) {
			if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
				return
			}
			if v, ok := obj.(*types.Var); ok && !v.IsField() && v.Parent() != pkg.Scope() {
				return // a local or a parameter
			}
			if c, ok := obj.(*types.Const); ok && c.Parent() != pkg.Scope() {
				return
			}
			if t, ok := obj.(*types.TypeName); ok && t.Parent() != pkg.Scope() {
				return
			}
			if to := fileOf(obj.Pos()); to != name {
				uses = append(uses, use{id.Pos(), to})
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				add(id, info.Uses[id])
			}
			if se, ok := n.(*ast.SelectorExpr); ok {
				if v, ok := info.Uses[se.Sel].(*types.Var); ok && v.IsField() && v.Pkg() == pkg {
					if typ := owner[v.Pos()]; typ != "" && fileOf(v.Pos()) != name {
						allReaches = append(allReaches, reach{name, typ, v.Name()})
						byType[typ]++
					}
				}
			}
			return true
		})
		sort.Slice(uses, func(i, j int) bool { return uses[i].pos < uses[j].pos })
		seen := map[string]bool{}
		for _, u := range uses {
			if !seen[u.file] {
				seen[u.file] = true
				g.out[name] = append(g.out[name], u.file)
			}
		}
	}
	if entryFile == "" {
		return fmt.Errorf("no method %s of %s", entry, typeName)
	}

	nm, nf := 0, 0
	var holders []string
	for _, f := range g.files {
		if n := methods[f]; n > 0 {
			nm += n
			nf++
			holders = append(holders, fmt.Sprintf("%s %d", f, n))
		}
	}
	arrows := 0
	var mutual []string
	for _, a := range g.files {
		arrows += len(g.out[a])
		for _, b := range g.out[a] {
			if a < b && contains(g.out[b], a) {
				mutual = append(mutual, a+" ⇄ "+b)
			}
		}
	}
	back, floors := g.walk(entryFile)
	fmt.Fprintf(w, "package %s: %d files\n", pkg.Name(), len(g.files))
	fmt.Fprintf(w, "%s methods: %d in %d files (%s)\n", typeName, nm, nf, strings.Join(holders, ", "))
	fmt.Fprintf(w, "arrows: %d\n", arrows)
	fmt.Fprintf(w, "mutual pairs: %d\n", len(mutual))
	fmt.Fprintf(w, "largest cycle: %d files\n", g.largestCycle())
	total := 0
	var types []string
	for t, n := range byType {
		total += n
		types = append(types, fmt.Sprintf("%s %d", t, n))
	}
	sort.Strings(types)
	into := 0
	for _, r := range allReaches {
		if only != nil && !only[r.typ] {
			continue
		}
		if mf := methodFiles[r.typ]; len(mf) > 0 && !mf[r.file] {
			reaches[r.file+" → "+r.typ+"."+r.field]++
			into++
		}
	}
	fmt.Fprintf(w, "field reaches: %d (%s)\n", total, strings.Join(types, ", "))
	fmt.Fprintf(w, "field reaches into another concern: %d\n", into)
	if listFields {
		var rs []string
		for r, n := range reaches {
			rs = append(rs, fmt.Sprintf("  %s ×%d", r, n))
		}
		sort.Strings(rs)
		for _, r := range rs {
			fmt.Fprintln(w, r)
		}
	}
	fmt.Fprintf(w, "floors: %d (from %s)\n", floors, entryFile)
	fmt.Fprintf(w, "arrows running back up: %d\n", len(back))
	if verbose {
		for _, b := range back {
			fmt.Fprintln(w, "  back up:", b)
		}
		for _, m := range mutual {
			fmt.Fprintln(w, "  mutual:", m)
		}
	}
	return nil
}

// walk runs the depth-first walk from entry (then from the files not
// reached, by name) and returns the arrows that reach a file on the walk's
// path, and the number of floors the other arrows make.
func (g *graph) walk(entry string) ([]string, int) {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	isBack := map[[2]string]bool{}
	var back []string
	var visit func(f string)
	visit = func(f string) {
		state[f] = onPath
		for _, t := range g.out[f] {
			switch state[t] {
			case unseen:
				visit(t)
			case onPath:
				isBack[[2]string{f, t}] = true
				back = append(back, f+" → "+t)
			}
		}
		state[f] = done
	}
	visit(entry)
	for _, f := range g.files {
		if state[f] == unseen {
			visit(f)
		}
	}
	// longest path over the arrows that do not run back up (a DAG)
	depth := map[string]int{}
	var height func(f string) int
	height = func(f string) int {
		if d, ok := depth[f]; ok {
			return d
		}
		depth[f] = 1
		d := 1
		for _, t := range g.out[f] {
			if !isBack[[2]string{f, t}] {
				d = max(d, 1+height(t))
			}
		}
		depth[f] = d
		return d
	}
	floors := 0
	for _, f := range g.files {
		floors = max(floors, height(f))
	}
	return back, floors
}

// largestCycle is the size of the largest strongly connected component
// (Tarjan) of more than one file.
func (g *graph) largestCycle() int {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	n, best := 0, 0
	var connect func(v string)
	connect = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.out[v] {
			if _, ok := index[w]; !ok {
				connect(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			size := 0
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				size++
				if w == v {
					break
				}
			}
			if size > 1 {
				best = max(best, size)
			}
		}
	}
	for _, f := range g.files {
		if _, ok := index[f]; !ok {
			connect(f)
		}
	}
	return best
}

// recvName is the type name of a receiver expression.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvName(t.X)
	}
	return ""
}

func contains(s []string, v string) bool {
	return slices.Contains(s, v)
}

// exportData maps the import paths the package at dir depends on to their
// export data files.
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, ok := strings.Cut(sc.Text(), " ")
		if ok && file != "" {
			m[path] = file
		}
	}
	return m, sc.Err()
}
