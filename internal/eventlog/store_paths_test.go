package eventlog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreRefusesLinks reproduces issue 34 item B10: the event log's
// directory is checked as the spool's is. Before, an events.db linked to
// another file was opened and the events written into that file, and a
// directory anyone may write to (where anyone could put such a link) was
// accepted. Now New refuses both, naming the path, and leaves the link's
// target as it was.
func TestStoreRefusesLinks(t *testing.T) {
	content := []byte("someone else's file\n")
	tests := []struct {
		name  string
		setup func(t *testing.T, base string) (dir, bad string)
		want  string
	}{
		{"events.db links to a file", func(t *testing.T, base string) (string, string) {
			dir := filepath.Join(base, "events")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(base, "target"), content, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(base, "target"), filepath.Join(dir, storeFile)); err != nil {
				t.Skipf("symlink: %v", err)
			}
			return dir, filepath.Join(dir, storeFile)
		}, "is a symbolic link"},
		{"anyone may write to the directory", func(t *testing.T, base string) (string, string) {
			dir := filepath.Join(base, "events")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return dir, dir
		}, "anyone may write to it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir, bad := tc.setup(t, base)
			l, err := New(Bounds{}, Options{Dir: dir})
			if err == nil {
				l.Accept(accepted("e1", time.Now(), 0))
				_ = l.Destruct() // writes the event out
			}
			if err == nil || !strings.Contains(err.Error(), "events: dir: "+bad) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error naming %s: %s", err, bad, tc.want)
			}
			if b, err := os.ReadFile(filepath.Join(base, "target")); err == nil && !bytes.Equal(b, content) {
				t.Fatalf("the link's target was changed: %q", b)
			}
		})
	}
}
