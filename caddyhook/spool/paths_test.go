//go:build unix

package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRefusesLinks (issue 20 item 10): Open and Recover refuse a spool
// directory or spool.db that is a symbolic link (bbolt would write the
// queue into the link's target, with the target's permissions), a
// spool.db that is not a regular file, and a directory anyone may write
// to; the error names the path, and the target is left as it was. Before:
// a spool.db linked to another file was opened, and the queue written
// into that file.
func TestOpenRefusesLinks(t *testing.T) {
	type opener struct {
		name string
		open func(Config) error
	}
	openers := []opener{
		{"Open", func(c Config) error {
			s, err := Open(c, nil)
			if err == nil {
				s.Close()
			}
			return err
		}},
		{"Recover", func(c Config) error {
			s, _, err := Recover(c, nil)
			if err == nil {
				s.Close()
			}
			return err
		}},
	}
	targetContent := []byte("someone else's file\n")
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, base string) (dir, target, bad string)
		want  string
	}{
		{"spool.db links to a file", func(t *testing.T, base string) (string, string, string) {
			dir, target := filepath.Join(base, "spool"), filepath.Join(base, "target")
			mkdir(t, dir, 0o700)
			writeFile(t, target, targetContent)
			symlink(t, target, filepath.Join(dir, DBFile))
			return dir, target, filepath.Join(dir, DBFile)
		}, "is a symbolic link"},
		{"spool.db links nowhere yet", func(t *testing.T, base string) (string, string, string) {
			dir, target := filepath.Join(base, "spool"), filepath.Join(base, "created-by-the-link")
			mkdir(t, dir, 0o700)
			symlink(t, target, filepath.Join(dir, DBFile))
			return dir, target, filepath.Join(dir, DBFile)
		}, "is a symbolic link"},
		{"the directory is a link", func(t *testing.T, base string) (string, string, string) {
			real, dir := filepath.Join(base, "real"), filepath.Join(base, "spool")
			mkdir(t, real, 0o700)
			symlink(t, real, dir)
			return dir, filepath.Join(real, DBFile), dir
		}, "is a symbolic link"},
		{"the directory links nowhere yet", func(t *testing.T, base string) (string, string, string) {
			real, dir := filepath.Join(base, "real"), filepath.Join(base, "spool")
			symlink(t, real, dir)
			return dir, real, dir
		}, "is a symbolic link"},
		{"spool.db is a FIFO", func(t *testing.T, base string) (string, string, string) {
			dir := filepath.Join(base, "spool")
			mkdir(t, dir, 0o700)
			if err := syscall.Mkfifo(filepath.Join(dir, DBFile), 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			return dir, "", filepath.Join(dir, DBFile)
		}, "is not a regular file"},
		{"anyone may write to the directory", func(t *testing.T, base string) (string, string, string) {
			dir := filepath.Join(base, "spool")
			mkdir(t, dir, 0o777)
			return dir, filepath.Join(dir, DBFile), dir
		}, "anyone may write to it"},
	} {
		for _, o := range openers {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				base := t.TempDir()
				dir, target, bad := c.setup(t, base)
				err := o.open(Config{Dir: dir})
				if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: %v, want an error naming %s: %s", o.name, err, bad, c.want)
				}
				if target == "" {
					return
				}
				switch b, err := os.ReadFile(target); {
				case c.name == "spool.db links to a file" && !bytes.Equal(b, targetContent):
					t.Fatalf("the link's target was changed: %q", b)
				case c.name != "spool.db links to a file" && !errors.Is(err, os.ErrNotExist) && !isDir(target):
					t.Fatalf("a spool file was created at %s (%v)", target, err)
				}
			})
		}
	}
	// a sticky world-writable directory (such as /tmp) holding a directory
	// of our own is fine, and so is an ordinary one
	base := t.TempDir()
	if err := os.Chmod(base, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{Dir: filepath.Join(base, "spool")}, nil)
	if err != nil {
		t.Fatalf("a spool directory inside a sticky shared one: %v", err)
	}
	s.Close()
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
