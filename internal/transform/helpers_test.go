package transform

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// writeFile creates dir/name (with parents) holding src.
func writeFile(t testing.TB, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// compileSource writes src as name in a fresh directory and compiles it
// (see Compile for the budget).
func compileSource(t testing.TB, name, src, export string, opts Options) *Program {
	t.Helper()
	dir := t.TempDir()
	p, err := Compile(writeFile(t, dir, name, src), export, opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

// runErr runs p and requires an *Error of the given kind.
func runErr(t testing.TB, p *Program, in Input, kind string) *Error {
	t.Helper()
	out, err := p.Run(context.Background(), in)
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("Run = %v, %v; want *Error of kind %q", out, err, kind)
	}
	if te.Kind != kind {
		t.Fatalf("Run error kind = %q (%s), want %q", te.Kind, te.Message, kind)
	}
	return te
}

// Compile compiles file outside any Cache, with a watchdog of its own.
// Without a Timeout in opts, the tests' programs get hangBound instead of
// the 100ms default: a test that is not about the budget must not fail
// because a loaded machine (or the race detector) ran a call slowly.
func Compile(file, export string, opts Options) (*Program, error) {
	if opts.Timeout == 0 {
		opts.Timeout = hangBound
	}
	return compile(file, export, opts, newWatchdog())
}
