package transform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// moduleExts are the module file extensions a mapping may name.
var moduleExts = map[string]bool{".ts": true, ".mts": true, ".js": true, ".mjs": true, ".cjs": true}

// importExts are the extensions a module may import: modules plus JSON data.
var importExts = map[string]bool{".ts": true, ".mts": true, ".js": true, ".mjs": true, ".cjs": true, ".json": true}

// ResolveDir returns the effective transforms directory: dir ("" → root itself) must resolve
// (after EvalSymlinks) inside root. root itself must exist. Errors are plain and name the offending value.
// A relative dir is taken relative to root.
func ResolveDir(root, dir string) (string, error) {
	realRoot, err := realDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("transforms root: %w", err) // the error names it as resolved
	}
	if err != nil {
		return "", fmt.Errorf("transforms root %q: %w", root, err)
	}
	if dir == "" {
		return realRoot, nil
	}
	if err := checkConfigPath(dir); err != nil {
		return "", fmt.Errorf("transforms dir %q: %w", dir, err)
	}
	candidate := dir
	if !filepath.IsAbs(candidate) {
		candidate = filepath.Join(realRoot, candidate)
	}
	real, err := filepath.EvalSymlinks(candidate)
	if err != nil {
		return "", fmt.Errorf("transforms dir %q: %w", dir, pathError(err, candidate))
	}
	if !within(realRoot, real) {
		return "", fmt.Errorf("transforms dir %q resolves outside the transforms root %s", dir, realRoot)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("transforms dir %q: %w", dir, pathError(err, real))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("transforms dir %q is not a directory", dir)
	}
	return real, nil
}

// ResolveModule resolves module (relative to dir; absolute allowed only if inside) to a real file path
// inside dir, refusing "..", percent-encoded traversal ("..%2f", "%2e%2e"), escaping symlinks (file or any
// directory on the way), non-existent files, non-regular files, and unsupported extensions.
func ResolveModule(dir, module string) (string, error) {
	realRoot, err := realDir(dir)
	if err != nil {
		return "", fmt.Errorf("transforms dir %q: %w", dir, err)
	}
	if module == "" {
		return "", errors.New("transform module path is empty")
	}
	if err := checkConfigPath(module); err != nil {
		return "", fmt.Errorf("transform module %q: %w", module, err)
	}
	candidate := module
	if !filepath.IsAbs(candidate) {
		candidate = filepath.Join(realRoot, candidate)
	}
	real, err := confineFile(realRoot, candidate, moduleExts)
	if err != nil {
		return "", fmt.Errorf("transform module %q: %w", module, err)
	}
	return real, nil
}

// realDir returns the absolute, symlink-free path of an existing directory.
func realDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("path is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", pathError(err, abs)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", pathError(err, real)
	}
	if !fi.IsDir() {
		return "", errors.New("not a directory")
	}
	return real, nil
}

// confineFile resolves candidate (absolute) through every symlink and
// checks that the result lies inside realRoot, is a regular file and has
// one of exts both as named and as resolved.
func confineFile(realRoot, candidate string, exts map[string]bool) (string, error) {
	if !exts[filepath.Ext(candidate)] {
		return "", fmt.Errorf("unsupported extension %q (want one of %s)", filepath.Ext(candidate), extList(exts))
	}
	real, err := filepath.EvalSymlinks(candidate)
	if err != nil {
		return "", pathError(err, candidate)
	}
	if !within(realRoot, real) {
		return "", fmt.Errorf("resolves outside the transforms dir %s", realRoot)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", pathError(err, real)
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if !exts[filepath.Ext(real)] {
		return "", fmt.Errorf("resolves to a file with unsupported extension %q", filepath.Ext(real))
	}
	return real, nil
}

// checkConfigPath refuses the lexical tricks a configured path may carry:
// NUL bytes, backslashes, ".." segments and percent-encoded dots, slashes,
// backslashes or percent signs (double encoding).
func checkConfigPath(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return errors.New("contains a NUL byte")
	}
	if strings.IndexByte(p, '\\') >= 0 {
		return errors.New(`contains a backslash`)
	}
	for i := 0; i+2 < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		switch strings.ToLower(p[i+1 : i+3]) {
		case "2e", "2f", "5c", "25":
			return errors.New("contains a percent-encoded path character")
		}
	}
	if slices.Contains(strings.Split(p, "/"), "..") {
		return errors.New(`contains a ".." segment`)
	}
	return nil
}

// within reports whether path equals root or lies below it; both must be
// clean absolute paths.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}

// pathError keeps the reason of an fs error on path: "<path> does not
// exist" names the path as resolved (a relative module or directory,
// joined to the directory it is relative to), so that a person sees
// where it was looked for; other errors lose their path (the caller
// names the value).
func pathError(err error, path string) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return notExistError(path)
		}
		return pe.Err
	}
	return err
}

// notExistError is a path that does not exist; it is fs.ErrNotExist.
type notExistError string

// Error implements error.
func (e notExistError) Error() string { return string(e) + " does not exist" }

// Unwrap makes errors.Is(err, fs.ErrNotExist) hold.
func (notExistError) Unwrap() error { return fs.ErrNotExist }

// extList renders an extension set in a stable order for messages.
func extList(exts map[string]bool) string {
	order := []string{".ts", ".mts", ".js", ".mjs", ".cjs", ".json"}
	var out []string
	for _, e := range order {
		if exts[e] {
			out = append(out, e)
		}
	}
	return strings.Join(out, " ")
}
