package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The Caddy binary (./cmd/caddy: Caddy with this module) is built once for
// every test that runs it as a process, in every package and every test
// process of a run: it is kept under the temp dir, keyed by the module
// root and a hash of the files the build reads, and built under a file
// lock, so that the processes of `go test ./...` wait for one build
// instead of each linking their own.
var caddyBuild struct {
	once sync.Once
	bin  string
	err  error
}

// CaddyBinary returns the path of the Caddy binary built from the module
// this package belongs to, building it on first use. The test is skipped
// where the go toolchain is not in PATH.
func CaddyBinary(tb testing.TB) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("go toolchain not in PATH; cannot build the caddy binary")
	}
	caddyBuild.once.Do(func() {
		start := time.Now()
		caddyBuild.bin, caddyBuild.err = buildCaddy(gobin)
		if caddyBuild.err == nil {
			tb.Logf("cmd/caddy ready in %v: %s", time.Since(start).Round(time.Millisecond), caddyBuild.bin)
		}
	})
	if caddyBuild.err != nil {
		tb.Fatal(caddyBuild.err)
	}
	return caddyBuild.bin
}

// buildCaddy builds ./cmd/caddy into the cache unless a build of the
// same sources is there.
func buildCaddy(gobin string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	sum, err := sourceHash(root)
	if err != nil {
		return "", err
	}
	rootKey := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "caddyhook-testkit", hex.EncodeToString(rootKey[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }() // closing the file unlocks it too
	bin := filepath.Join(dir, "caddy-"+sum)
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		_ = os.Chtimes(bin, now, now) // in use: not pruned
		return bin, nil
	}
	tmp := bin + ".building"
	build := exec.Command(gobin, "build", "-o", tmp, "./cmd/caddy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/caddy: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	pruneBuilds(dir, bin)
	return bin, nil
}

// pruneBuilds removes the builds of older sources that no test has
// started for an hour (a binary is some 100 MB).
func pruneBuilds(dir, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, "caddy-*"))
	for _, f := range old {
		if fi, err := os.Stat(f); err == nil && f != keep && time.Since(fi.ModTime()) > time.Hour {
			_ = os.Remove(f)
		}
	}
}

// sourceHash hashes what the build of ./cmd/caddy reads: every file of
// the module but tests, test data, documents and what git ignores here
// (.git, .cache), with its path.
func sourceHash(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "e2e") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".md") ||
			strings.HasSuffix(name, ".test") || strings.HasSuffix(name, ".prof") || path == filepath.Join(root, "caddy") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("hashing the sources: %w", err)
	}
	v, _ := exec.Command("go", "version").Output()
	h.Write(v)
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// ModuleRoot is the directory of the go.mod above the working directory
// (a package's tests run in the package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
