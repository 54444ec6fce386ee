package caddyhook

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/tmpl"
	"github.com/caddyhook/caddyhook/internal/transform"
)

// transformCache is the pooled transform.Cache (transformsPoolKey):
// compiled modules survive a config reload and are recompiled only when
// their files changed.
type transformCache struct{ *transform.Cache }

// Destruct implements caddy.Destructor; compiled programs are garbage
// collected with the cache.
func (transformCache) Destruct() error { return nil }

// transformSet compiles the transforms of one handler: the effective
// transforms directory, the options and the shared cache.
type transformSet struct {
	root, subdir string // transforms_root and transforms_dir, as configured
	held         *poolHold
	dir          string
	opts         transform.Options
	cache        *transform.Cache
}

// newTransformSet resolves the transforms directory lazily: it is only
// required when a mapping names a transform.
func newTransformSet(root, subdir string, timeout time.Duration, maxBytes int64, held *poolHold) *transformSet {
	return &transformSet{root: root, subdir: subdir, held: held, opts: transform.Options{
		Timeout:  timeout,
		MaxBytes: maxBytes,
	}}
}

// compile resolves ref inside the transforms directory and compiles it
// (or takes it from the cache). Errors name the mapping.
func (s *transformSet) compile(id string, ref *TransformRef) (*mappingTransform, error) {
	if s.cache == nil {
		if err := s.open(); err != nil {
			return nil, fmt.Errorf("mapping %s: transform: %w", id, err)
		}
	}
	file, err := transform.ResolveModule(s.dir, ref.Module)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: transform: %w", id, err)
	}
	prog, err := s.cache.Program(file, strings.TrimSpace(ref.Export), s.opts)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: transform: %w", id, err)
	}
	return &mappingTransform{prog: prog}, nil
}

// open resolves the transforms directory and loads the shared cache.
func (s *transformSet) open() error {
	root := s.root
	if root == "" {
		root = filepath.Join("hooks", "transforms")
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(configDir(os.Args), root)
	}
	dir, err := transform.ResolveDir(root, s.subdir)
	if err != nil {
		return err
	}
	s.dir = dir
	s.opts.Root = dir
	c, _, err := hold(s.held, transformsPoolKey, func() (transformCache, error) {
		return transformCache{transform.NewCache()}, nil
	})
	s.cache = c.Cache
	return err
}

// configDir is the directory of the config file Caddy was started with
// (--config / -c on the command line), else the working directory (where
// Caddy looks for ./Caddyfile).
func configDir(args []string) string {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "config" && name != "c") {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				break
			}
			val = args[i+1]
		}
		if abs, err := filepath.Abs(val); err == nil {
			return filepath.Dir(abs)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return wd
}

// mappingTransform runs a mapping's compiled module.
type mappingTransform struct {
	prog *transform.Program
}

// run calls the module with ctx = { payload, headers, url, path }. It
// returns the override fields, or nil when the module returned null.
func (t *mappingTransform) run(ex *exchange, vars *tmpl.Vars) (map[string]any, error) {
	return t.prog.Run(ex.r.Context(), transformInput(ex, vars))
}

// runEach calls the module once per element of items, the for_each list
// at payload key (see transform.Program.RunEach).
func (t *mappingTransform) runEach(ex *exchange, vars *tmpl.Vars, key string, items []any) ([]map[string]any, error) {
	return t.prog.RunEach(ex.r.Context(), transformInput(ex, vars), key, items)
}

// transformInput is what a transform sees of the request.
func transformInput(ex *exchange, vars *tmpl.Vars) transform.Input {
	return transform.Input{
		Payload: vars.Payload,
		Headers: vars.Headers, // without the hook token's headers
		Path:    ex.sub,
		URL:     ex.r.URL,
	}
}
