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
// directory is checked as the spool's is (internal/safefile, whose own
// test covers every case). Before, an events.db linked to another file
// was opened and the events written into that file, and a directory
// anyone may write to (where anyone could put such a link) was accepted.
// Now New refuses both, naming the path, and the link's target is left as
// it was.
func TestStoreRefusesLinks(t *testing.T) {
	base := t.TempDir()
	linked, open := filepath.Join(base, "linked"), filepath.Join(base, "open")
	target := filepath.Join(base, "target")
	content := []byte("someone else's file\n")
	if err := os.WriteFile(target, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(linked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(linked, storeFile)); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if err := os.Mkdir(open, 0o700); err != nil || os.Chmod(open, 0o777) != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		linked: filepath.Join(linked, storeFile) + " is a symbolic link",
		open:   open + ": anyone may write to it",
	} {
		l, err := New(Bounds{}, Options{Dir: dir})
		if err == nil {
			l.Accept(accepted("e1", time.Now(), 0))
			_ = l.Destruct() // writes the event out
		}
		if err == nil || !strings.Contains(err.Error(), "events: dir: "+want) {
			t.Errorf("New(%s) = %v, want an error %q", dir, err, want)
		}
	}
	if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the link's target was changed: %q, %v", b, err)
	}
}
