package transform

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// Program is a compiled transform module, ready to Run concurrently.
type Program struct {
	file   string // real path of the module
	name   string // module path relative to the root, for messages
	export string
	opts   Options
	code   *goja.Program
	bigint bool        // the module can make BigInts: its realm keeps the BigInt function (bigint.go)
	inputs []fileState // every file bundled, as compiled
	pool   *pool
	watch  *watchdog
}

// compile bundles file with esbuild (imports restricted to relative files
// inside the confinement root opts.Root, "" → filepath.Dir(file), which
// must also hold file itself), compiles it for goja and checks that the
// export exists and is a function. Syntax errors name file:line:column,
// relative to the root.
//
// The module's top level is run once here, under the
// time budget, so a throwing module or a missing export fails now rather
// than on the first request. TypeScript is transpiled, not type-checked:
// a type error that is not a syntax error does not fail compilation.
// w is the watchdog of the caller (a Cache).
func compile(file, export string, opts Options, w *watchdog) (*Program, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("transform module %q: %w", file, err)
	}
	opts = opts.normalize(abs)
	root, err := realDir(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("transforms dir %q: %w", opts.Root, err)
	}
	opts.Root = root
	real, err := confineFile(root, abs, moduleExts)
	if err != nil {
		return nil, fmt.Errorf("transform module %q: %w", file, err)
	}
	name := relTo(root, real)
	b, err := bundle(real, root)
	if err != nil {
		return nil, err
	}
	ast, err := goja.Parse(name, b.code, parser.WithSourceMapLoader(refuseSourceMapFile))
	if err != nil {
		return nil, fmt.Errorf("transform module %s: the runtime cannot parse the bundled code: %w", name, err)
	}
	bigint := usesBigInt(b.code, ast)
	if bigint {
		if err := rewriteBigInt(ast, ast.File); err != nil {
			return nil, fmt.Errorf("transform module %s: %w", name, err)
		}
	}
	code, err := goja.CompileAST(ast, false)
	if err != nil {
		return nil, fmt.Errorf("transform module %s: the runtime cannot compile the bundled code: %w", name, err)
	}
	p := &Program{
		file: real, name: name, export: export, opts: opts, code: code, bigint: bigint,
		inputs: b.inputs, pool: newPool(opts.Runtimes), watch: w,
	}
	// Idle runtimes park a worker goroutine each; end them once nobody
	// can run this program any more (workers do not reference p).
	runtime.AddCleanup(p, (*pool).close, p.pool)
	if _, err := p.supervise(context.Background(), nil, func(*vm) (map[string]any, error) { return nil, nil }); err != nil {
		if te, ok := errors.AsType[*Error](err); ok {
			return nil, fmt.Errorf("transform module %s: loading: %s", name, te.Message)
		}
		return nil, fmt.Errorf("transform module %s: loading: %w", name, err)
	}
	return p, nil
}

// refuseSourceMapFile keeps the parser from reading source maps from
// disk; the bundle carries its map inline.
func refuseSourceMapFile(string) ([]byte, error) {
	return nil, errors.New("source map files are not loaded")
}
