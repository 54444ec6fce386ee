package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPrepareRefuses: Prepare refuses a directory or file that is a
// symbolic link (also one pointing nowhere yet), a file that is not a
// regular file and a directory anyone may write to, naming the path,
// and creates nothing; a missing directory is created (0700), and a
// directory of one's own inside a sticky shared one (such as /tmp) is
// fine. OpenNoFollow refuses a link put in place of the file afterwards.
func TestPrepareRefuses(t *testing.T) {
	const name = "data.db"
	tests := []struct {
		name  string
		setup func(t *testing.T, base string) (dir, bad string)
		want  string
	}{
		{"the file links to a file", func(t *testing.T, base string) (string, string) {
			dir := mkdir(t, base, "d", 0o700)
			write(t, filepath.Join(base, "target"))
			link(t, filepath.Join(base, "target"), filepath.Join(dir, name))
			return dir, filepath.Join(dir, name)
		}, "is a symbolic link"},
		{"the file links nowhere yet", func(t *testing.T, base string) (string, string) {
			dir := mkdir(t, base, "d", 0o700)
			link(t, filepath.Join(base, "target"), filepath.Join(dir, name))
			return dir, filepath.Join(dir, name)
		}, "is a symbolic link"},
		{"the directory is a link", func(t *testing.T, base string) (string, string) {
			real := mkdir(t, base, "real", 0o700)
			link(t, real, filepath.Join(base, "d"))
			return filepath.Join(base, "d"), filepath.Join(base, "d")
		}, "is a symbolic link"},
		{"the directory links nowhere yet", func(t *testing.T, base string) (string, string) {
			link(t, filepath.Join(base, "real"), filepath.Join(base, "d"))
			return filepath.Join(base, "d"), filepath.Join(base, "d")
		}, "is a symbolic link"},
		{"the file is a FIFO", func(t *testing.T, base string) (string, string) {
			dir := mkdir(t, base, "d", 0o700)
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			return dir, filepath.Join(dir, name)
		}, "is not a regular file"},
		{"anyone may write to the directory", func(t *testing.T, base string) (string, string) {
			dir := mkdir(t, base, "d", 0o777)
			return dir, dir
		}, "anyone may write to it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir, bad := tc.setup(t, base)
			path, err := Prepare(dir, name)
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %q, %v; want an error naming %s: %s", path, err, bad, tc.want)
			}
			if strings.Contains(tc.name, "nowhere") {
				for _, target := range []string{"real", "target"} {
					if _, err := os.Lstat(filepath.Join(base, target)); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("%s was created through the link (%v)", target, err)
					}
				}
			}
		})
	}

	base := t.TempDir()
	if err := os.Chmod(base, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	path, err := Prepare(filepath.Join(base, "d"), name)
	if err != nil || path != filepath.Join(base, "d", name) {
		t.Fatalf("a new directory inside a sticky shared one: %q, %v", path, err)
	}
	if fi, err := os.Stat(filepath.Join(base, "d")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("the directory made: %v, %v", fi.Mode(), err)
	}
	link(t, filepath.Join(base, "elsewhere"), path)
	if f, err := OpenNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenNoFollow through a link: %v", err)
	}
}

func mkdir(t *testing.T, base, name string, perm os.FileMode) string {
	t.Helper()
	dir := filepath.Join(base, name)
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("someone else's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
}
