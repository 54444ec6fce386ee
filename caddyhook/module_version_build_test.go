//go:build upgrade

package caddyhook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/version"
)

// TestListModulesShowsTheVersion (issue 30 item 1): a caddy built with
// caddyhook as a dependency, as xcaddy builds it (a module requiring
// github.com/caddyhook/caddyhook at the release, replaced by this
// checkout), shows the release in `caddy list-modules --versions` for
// every module caddyhook registers, and `caddy hooks version` prints it.
// (A `go build ./cmd/caddy` of this repository has caddyhook as its main
// module, which Caddy's list does not look at: see the README.)
func TestListModulesShowsTheVersion(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/caddyhookbuild\n\ngo 1.26.8\n\nrequire " + version.Module + " " + version.Version +
		"\n\nreplace " + version.Module + " => " + root + "\n"
	main, err := os.ReadFile(filepath.Join(root, "cmd", "caddy", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "main.go": main, "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run("go", "mod", "tidy")
	run("go", "build", "-o", "caddy", ".")
	mods := run(filepath.Join(dir, "caddy"), "list-modules", "--versions")
	for _, id := range []string{"http.handlers.hooks", "admin.api.hooks", "http.handlers.hooks.cluster.nats", "http.handlers.hooks_console", "hooks"} {
		if !strings.Contains(mods, "\n"+id+" "+version.Version+"\n") && !strings.HasPrefix(mods, id+" "+version.Version+"\n") {
			t.Errorf("caddy list-modules --versions does not show %s %s:\n%s", id, version.Version, mods)
		}
	}
	if out := run(filepath.Join(dir, "caddy"), "hooks", "version"); !strings.HasPrefix(out, "caddyhook "+version.Version+" (module "+version.Version+" => ") {
		t.Errorf("caddy hooks version: %q", out)
	}
}
