package transform

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/evanw/esbuild/pkg/api"
)

// exportsVar is the name esbuild's IIFE assigns the module exports to;
// it is local to the wrapper function, never a global.
const exportsVar = "__caddyhook_exports"

// bundleFile is the (never written) output path esbuild needs to lay out
// the source map; it sits in the root so source names are root-relative.
const bundleFile = "__caddyhook_bundle.js"

// bundled is a module after esbuild: a script whose completion value is a
// function returning the module's exports, and every file it was built from.
type bundled struct {
	code   string
	inputs []fileState // exactly what was compiled, in no particular order
}

// bundle builds file (already confined to root) with every relative import
// inlined. Imports that are not relative, or that resolve outside root,
// fail the build with the importing file and line.
func bundle(file, root string) (*bundled, error) {
	inputs := &loadedFiles{}
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{file},
		AbsWorkingDir: root,
		Outfile:       filepath.Join(root, bundleFile),
		Bundle:        true,
		Write:         false,
		Format:        api.FormatIIFE,
		GlobalName:    exportsVar,
		Platform:      api.PlatformNeutral,
		// goja runs ES2022 except async generators / for-await, which
		// esbuild lowers to generators.
		Target: api.ES2022,
		// Dynamic import() becomes a require() call, which the sandbox
		// does not have, so a computed import fails at run time. Object
		// spread and rest are lowered to helper loops: goja copies them in
		// one native step the interrupt cannot stop ({..."x".repeat(1e6)}
		// runs for many seconds), while the loops run step by step.
		Supported: map[string]bool{"async-generator": false, "for-await": false, "dynamic-import": false,
			"object-rest-spread": false},
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
		TsconfigRaw:    "{}",
		Charset:        api.CharsetUTF8,
		LegalComments:  api.LegalCommentsNone,
		LogLevel:       api.LogLevelSilent,
		Plugins:        []api.Plugin{confinePlugin(root, inputs)},
	})
	if len(res.Errors) > 0 {
		return nil, buildError(file, root, res.Errors)
	}
	var js, sourceMap []byte
	for _, out := range res.OutputFiles {
		switch {
		case strings.HasSuffix(out.Path, ".map"):
			sourceMap = out.Contents
		case strings.HasSuffix(out.Path, ".js"):
			js = out.Contents
		}
	}
	if js == nil {
		return nil, fmt.Errorf("transform module %s: bundler produced no output", file)
	}
	var b strings.Builder
	b.Grow(len(js) + len(sourceMap)*4/3 + 128)
	// The wrapper opens on the first line so the source map's line
	// numbers stay right; goja looks for the map comment on the last line
	// before a closing "})". Its parameter receives the checked BigInt
	// operations (bigint.go).
	b.WriteString("(function(" + bigintOps + "){")
	b.Write(js)
	b.WriteString("\nreturn " + exportsVar + ";\n")
	if sourceMap != nil {
		b.WriteString("//# sourceMappingURL=data:application/json;base64,")
		b.WriteString(base64.StdEncoding.EncodeToString(sourceMap))
	}
	b.WriteString("\n})")
	return &bundled{code: b.String(), inputs: inputs.files}, nil
}

// loadedFiles collects the files a build loaded; esbuild calls loaders
// concurrently.
type loadedFiles struct {
	mu    sync.Mutex
	files []fileState
}

// add records one loaded file.
func (l *loadedFiles) add(st fileState) {
	l.mu.Lock()
	l.files = append(l.files, st)
	l.mu.Unlock()
}

// loaders maps the extensions resolveImport accepts to esbuild loaders.
var loaders = map[string]api.Loader{
	".ts": api.LoaderTS, ".mts": api.LoaderTS,
	".js": api.LoaderJS, ".mjs": api.LoaderJS, ".cjs": api.LoaderJS,
	".json": api.LoaderJSON,
}

// confinePlugin resolves every import itself: the entry point, and
// relative specifiers that stay inside root after following symlinks.
// Anything else (packages, node builtins, absolute paths, URLs) is refused.
// It also loads every file itself, recording the fingerprint of exactly
// the bytes that were compiled.
func confinePlugin(root string, inputs *loadedFiles) api.Plugin {
	return api.Plugin{
		Name: "caddyhook-confine",
		Setup: func(build api.PluginBuild) {
			build.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
				var real string
				var err error
				if args.Kind == api.ResolveEntryPoint {
					real, err = confineFile(root, args.Path, moduleExts)
				} else {
					real, err = resolveImport(root, args.ResolveDir, args.Path)
				}
				if err != nil {
					return api.OnResolveResult{Errors: []api.Message{{Text: err.Error()}}}, nil
				}
				return api.OnResolveResult{Path: real, Namespace: "file"}, nil
			})
			build.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: "file"}, func(args api.OnLoadArgs) (api.OnLoadResult, error) {
				src, st, err := readState(args.Path)
				if err != nil {
					return api.OnLoadResult{Errors: []api.Message{{Text: err.Error()}}}, nil
				}
				inputs.add(st)
				contents := neutralizeSourceMapComments(string(src))
				return api.OnLoadResult{Contents: &contents, Loader: loaders[filepath.Ext(args.Path)], ResolveDir: filepath.Dir(args.Path)}, nil
			})
		},
	}
}

// resolveImport resolves a relative import specifier from dir the way a
// bundler does (exact file, then each extension, then dir/index.ext) and
// confines the result to root.
func resolveImport(root, dir, spec string) (string, error) {
	if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
		return "", fmt.Errorf("import %q refused: only relative imports of files inside the transforms dir are allowed", spec)
	}
	if strings.ContainsAny(spec, "\x00\\?#") {
		return "", fmt.Errorf("import %q refused: invalid character in path", spec)
	}
	base := filepath.Join(dir, filepath.FromSlash(spec))
	if !within(root, base) {
		return "", fmt.Errorf("import %q refused: resolves outside the transforms dir", spec)
	}
	candidates := []string{base}
	for _, ext := range []string{".ts", ".mts", ".js", ".mjs", ".cjs", ".json"} {
		candidates = append(candidates, base+ext)
	}
	for _, ext := range []string{".ts", ".mts", ".js", ".mjs", ".cjs"} {
		candidates = append(candidates, filepath.Join(base, "index"+ext))
	}
	for _, c := range candidates {
		fi, err := os.Stat(c)
		if err != nil || fi.IsDir() {
			continue
		}
		real, err := confineFile(root, c, importExts)
		if err != nil {
			return "", fmt.Errorf("import %q refused: %w", spec, err)
		}
		return real, nil
	}
	return "", fmt.Errorf("import %q: no such file in the transforms dir", spec)
}

// buildError renders esbuild's errors as one error naming file:line:column
// of the first problem (paths relative to root).
func buildError(file, root string, msgs []api.Message) error {
	first := msgs[0]
	where := relTo(root, file)
	if loc := first.Location; loc != nil {
		where = fmt.Sprintf("%s:%d:%d", relTo(root, loc.File), loc.Line, loc.Column+1)
	}
	text := first.Text
	if len(msgs) > 1 {
		text += fmt.Sprintf(" (and %d more errors)", len(msgs)-1)
	}
	return errors.New("transform module " + relTo(root, file) + ": " + where + ": " + text)
}

// relTo renders path relative to root when it lies inside it.
func relTo(root, path string) string {
	if !filepath.IsAbs(path) {
		return filepath.ToSlash(path)
	}
	if rel, err := filepath.Rel(root, path); err == nil && within(root, path) {
		return filepath.ToSlash(rel)
	}
	return path
}

// sourceMapComment matches the marker of a "//# sourceMappingURL=" (or
// "//@", or block comment) reference.
var sourceMapComment = regexp.MustCompile(`([#@][ \t]*)sourceMappingURL=`)

// neutralizeSourceMapComments disables source-map references in a module:
// the bundler would otherwise read the referenced file, from anywhere on
// disk, to chain maps. (The same text inside a string literal is altered
// too; a transform has no reason to contain it.)
func neutralizeSourceMapComments(src string) string {
	if !strings.Contains(src, "sourceMappingURL=") {
		return src
	}
	return sourceMapComment.ReplaceAllString(src, "${1}sourceMappingURL-ignored=")
}
