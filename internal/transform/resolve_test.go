package transform

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// confinementTree builds:
//
//	base/outside/secret.js          a file outside the root
//	base/outside/dir/evil.js
//	base/root/ok.ts, root/sub/deep.js, root/notes.txt, root/fifo-like dir "dir.js/"
//	base/root/link-out.js  -> ../outside/secret.js   (escaping file symlink)
//	base/root/link-in.js   -> ok.ts                  (symlink staying inside)
//	base/root/linkdir      -> ../outside/dir         (escaping directory symlink)
//	base/root/sublink      -> sub                    (directory symlink inside)
//	base/root/dangling.js  -> nowhere.js
func confinementTree(t *testing.T) (base, root string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	writeFile(t, base, "outside/secret.js", "export default () => null")
	writeFile(t, base, "outside/dir/evil.js", "export default () => null")
	writeFile(t, root, "ok.ts", "export default () => null")
	writeFile(t, root, "sub/deep.js", "export default () => null")
	writeFile(t, root, "notes.txt", "x")
	writeFile(t, root, "sub/dir/.keep", "")
	if err := os.Mkdir(filepath.Join(root, "dir.js"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-out.js":  "../outside/secret.js",
		"link-in.js":   "ok.ts",
		"linkdir":      "../outside/dir",
		"sublink":      "sub",
		"dangling.js":  "nowhere.js",
		"txtlink.js":   "notes.txt",
		"rootlink":     ".",
		"abs-out.js":   filepath.Join(base, "outside", "secret.js"),
		"sub/up.js":    "../../outside/secret.js",
		"sub/inner.js": "../ok.ts",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return base, root
}

func TestResolveModule(t *testing.T) {
	base, root := confinementTree(t)
	tests := []struct {
		module string
		want   string // file under root, or "" when refused
		errHas string
	}{
		{module: "ok.ts", want: "ok.ts"},
		{module: "./ok.ts", want: "ok.ts"},
		{module: "sub/deep.js", want: "sub/deep.js"},
		{module: "link-in.js", want: "ok.ts"},
		{module: "sublink/deep.js", want: "sub/deep.js"},
		{module: "rootlink/ok.ts", want: "ok.ts"},
		{module: "sub/inner.js", want: "ok.ts"},
		{module: filepath.Join(root, "ok.ts"), want: "ok.ts"},
		{module: "", errHas: "empty"},
		{module: "../outside/secret.js", errHas: `".." segment`},
		{module: "sub/../../outside/secret.js", errHas: `".." segment`},
		{module: "sub/../ok.ts", errHas: `".." segment`},
		{module: "..%2foutside%2fsecret.js", errHas: "percent-encoded"},
		{module: "..%2Foutside/secret.js", errHas: "percent-encoded"},
		{module: "%2e%2e/outside/secret.js", errHas: "percent-encoded"},
		{module: "%2E%2E/outside/secret.js", errHas: "percent-encoded"},
		{module: "%252e%252e/outside/secret.js", errHas: "percent-encoded"},
		{module: `..\outside\secret.js`, errHas: "backslash"},
		{module: "ok.ts\x00.js", errHas: "NUL"},
		{module: filepath.Join(base, "outside", "secret.js"), errHas: "outside"},
		{module: "/etc/passwd", errHas: "extension"},
		{module: "link-out.js", errHas: "outside"},
		{module: "abs-out.js", errHas: "outside"},
		{module: "sub/up.js", errHas: "outside"},
		{module: "linkdir/evil.js", errHas: "outside"},
		{module: "dangling.js", errHas: "does not exist"},
		{module: "missing.ts", errHas: "does not exist"},
		{module: "notes.txt", errHas: "extension"},
		{module: "txtlink.js", errHas: "extension"},
		{module: "dir.js", errHas: "not a regular file"},
		{module: "ok.TS", errHas: "extension"},
	}
	for _, tc := range tests {
		t.Run(tc.module, func(t *testing.T) {
			got, err := ResolveModule(root, tc.module)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ResolveModule(%q) = %q, want error containing %q", tc.module, got, tc.errHas)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("error %q does not contain %q", err, tc.errHas)
				}
				if strings.Contains(err.Error(), "secret") && !strings.Contains(tc.module, "secret") {
					t.Fatalf("error %q reveals the symlink target", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveModule(%q): %v", tc.module, err)
			}
			realRoot, _ := filepath.EvalSymlinks(root)
			if want := filepath.Join(realRoot, tc.want); got != want {
				t.Fatalf("ResolveModule(%q) = %q, want %q", tc.module, got, want)
			}
		})
	}
}

// TestMissingNamesTheResolvedPath (issue 31 item 6): a missing module,
// transforms dir or root names the path it was looked for at.
func TestMissingNamesTheResolvedPath(t *testing.T) {
	base, root := confinementTree(t)
	realRoot, _ := filepath.EvalSymlinks(root)
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"module", func() error { _, err := ResolveModule(root, "missing.ts"); return err },
			`transform module "missing.ts": ` + filepath.Join(realRoot, "missing.ts") + " does not exist"},
		{"module in a subdirectory", func() error { _, err := ResolveModule(root, "sub/none.js"); return err },
			`transform module "sub/none.js": ` + filepath.Join(realRoot, "sub", "none.js") + " does not exist"},
		{"dir", func() error { _, err := ResolveDir(root, "nope"); return err },
			`transforms dir "nope": ` + filepath.Join(realRoot, "nope") + " does not exist"},
		{"root", func() error { _, err := ResolveDir(filepath.Join(base, "missing"), ""); return err },
			"transforms root: " + filepath.Join(base, "missing") + " does not exist"},
	} {
		if err := tc.err(); err == nil || err.Error() != tc.want || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestResolveDir(t *testing.T) {
	base, root := confinementTree(t)
	realRoot, _ := filepath.EvalSymlinks(root)
	tests := []struct {
		root, dir string
		want      string // relative to realRoot; "-" when refused
		errHas    string
	}{
		{root: root, dir: "", want: "."},
		{root: root, dir: "sub", want: "sub"},
		{root: root, dir: "sub/dir", want: "sub/dir"},
		{root: root, dir: "sublink", want: "sub"},
		{root: root, dir: filepath.Join(root, "sub"), want: "sub"},
		{root: root, dir: root, want: "."},
		{root: root, dir: "linkdir", want: "-", errHas: "outside"},
		{root: root, dir: "../outside", want: "-", errHas: `".."`},
		{root: root, dir: "sub/%2e%2e/%2e%2e/outside", want: "-", errHas: "percent-encoded"},
		{root: root, dir: filepath.Join(base, "outside"), want: "-", errHas: "outside"},
		{root: root, dir: "/", want: "-", errHas: "outside"},
		{root: root, dir: "ok.ts", want: "-", errHas: "not a directory"},
		{root: root, dir: "nope", want: "-", errHas: "does not exist"},
		{root: filepath.Join(base, "missing"), dir: "", want: "-", errHas: "does not exist"},
		{root: filepath.Join(root, "ok.ts"), dir: "", want: "-", errHas: "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			got, err := ResolveDir(tc.root, tc.dir)
			if tc.want == "-" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("ResolveDir(%q, %q) = %q, %v; want error containing %q", tc.root, tc.dir, got, err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResolveDir(%q, %q): %v", tc.root, tc.dir, err)
			}
			if want := filepath.Join(realRoot, tc.want); got != want {
				t.Fatalf("ResolveDir = %q, want %q", got, want)
			}
		})
	}
}

// FuzzResolveModule checks that no module string, however crafted, makes
// ResolveModule return a path outside the directory or anything but an
// existing regular file with a module extension.
func FuzzResolveModule(f *testing.F) {
	for _, s := range []string{"ok.ts", "../outside/secret.js", "..%2fsecret.js", "link-out.js", "linkdir/evil.js",
		"sublink/deep.js", "rootlink/rootlink/ok.ts", "/etc/passwd", "%2e%2e/x.js", "sub/./deep.js", "//ok.ts"} {
		f.Add(s)
	}
	base := f.TempDir()
	root := filepath.Join(base, "root")
	writeFile(f, base, "outside/secret.js", "x")
	writeFile(f, base, "outside/dir/evil.js", "x")
	writeFile(f, root, "ok.ts", "x")
	writeFile(f, root, "sub/deep.js", "x")
	for link, target := range map[string]string{"link-out.js": "../outside/secret.js", "linkdir": "../outside/dir", "sublink": "sub", "rootlink": "."} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, module string) {
		got, err := ResolveModule(root, module)
		if err != nil {
			return
		}
		if !within(realRoot, got) {
			t.Fatalf("ResolveModule(%q) = %q escapes %q", module, got, realRoot)
		}
		fi, err := os.Lstat(got)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("ResolveModule(%q) = %q is not an existing regular file (%v)", module, got, err)
		}
		if !moduleExts[filepath.Ext(got)] {
			t.Fatalf("ResolveModule(%q) = %q has extension %q", module, got, filepath.Ext(got))
		}
		if real, _ := filepath.EvalSymlinks(got); real != got {
			t.Fatalf("ResolveModule(%q) = %q is not a real path (%q)", module, got, real)
		}
	})
}
