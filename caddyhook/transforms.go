package caddyhook

import (
	"fmt"
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

// defaultTransformsRoot is the transforms root when none is configured,
// relative to the Caddyfile's directory (JSON: Caddy's working directory).
var defaultTransformsRoot = filepath.Join("hooks", "transforms")

// open resolves the transforms directory and loads the shared cache. A
// relative root is taken relative to the working directory, as Caddy
// takes the relative paths of a JSON config (a Caddyfile's was made
// absolute by the adapter: caddyfilePath).
func (s *transformSet) open() error {
	root := s.root
	if root == "" {
		root = defaultTransformsRoot
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	dir, err := transform.ResolveDir(root, s.subdir)
	if err != nil && s.root == "" {
		return fmt.Errorf("%w (the default of transforms_root: hooks/transforms beside the Caddyfile, or in Caddy's working directory for a JSON config)", err)
	}
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

// caddyfilePath resolves a path written in the Caddyfile file as Caddy's
// import resolves one: relative to that file's directory (the adapter's
// filename, "Caddyfile" when it has none, taken relative to the working
// directory). The adapted JSON so carries an absolute path, right
// wherever it is loaded: caddy reload adapts in its own process and posts
// the JSON to a Caddy that may run elsewhere.
func caddyfilePath(file, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	if file == "" {
		file = "Caddyfile"
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return path
	}
	return filepath.Join(filepath.Dir(abs), path)
}

// usesTransforms reports whether a mapping names a transform.
func usesTransforms(mappings []Mapping) bool {
	for _, m := range mappings {
		if m.Transform != nil {
			return true
		}
	}
	return false
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
