package loopstore

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestFreezeBlocksWritesAndRemoveCleansUp: a write into a frozen store
// waits until it is thawed while a read goes on; Fill ends at a full
// disk; Remove leaves nothing mounted, even frozen.
func TestFreezeBlocksWritesAndRemoveCleansUp(t *testing.T) {
	Require(t)
	s, err := Make(32 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Remove() })
	name := filepath.Join(s.Dir, "f")
	if err := os.WriteFile(name, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze(time.Minute); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- os.WriteFile(filepath.Join(s.Dir, "g"), []byte("during"), 0o600) }()
	if b, err := os.ReadFile(name); err != nil || string(b) != "before" {
		t.Fatalf("read while frozen: %q %v", b, err)
	}
	select {
	case err := <-wrote:
		t.Fatalf("a write into the frozen store returned (%v) before the thaw", err)
	case <-time.After(200 * time.Millisecond): // a write that went through would be back by now
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write after the thaw: %v", err)
	}
	if _, err := s.Fill(); err != nil {
		t.Fatalf("fill: %v", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "h"), make([]byte, 1<<20), 0o600); err == nil {
		t.Fatal("a write into the full store succeeded")
	}
	if err := s.Freeze(time.Minute); err != nil { // removed frozen: the cleanup thaws first
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if mounted(s.Dir) {
		t.Fatalf("%s still mounted", s.Dir)
	}
	if _, err := os.Stat(filepath.Dir(s.Dir)); !os.IsNotExist(err) {
		t.Fatalf("store directory left behind: %v", err)
	}
}

// TestWatchdogCleansUpAfterAProcessDies: a store made by a process that
// is then killed (no cleanup of its own runs) is thawed and unmounted by
// its watchdog.
func TestWatchdogCleansUpAfterAProcessDies(t *testing.T) {
	Require(t)
	if os.Getenv("LOOPSTORE_CHILD") == "1" {
		s, err := Make(16 << 20)
		if err != nil {
			os.Exit(3)
		}
		if err := s.Freeze(time.Minute); err != nil {
			os.Exit(4)
		}
		_ = os.WriteFile(os.Getenv("LOOPSTORE_DIR_FILE"), []byte(s.Dir), 0o600)
		time.Sleep(time.Hour) // killed by the parent
	}
	dirFile := filepath.Join(t.TempDir(), "dir")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestWatchdogCleansUpAfterAProcessDies$")
	cmd.Env = append(os.Environ(), "LOOPSTORE_CHILD=1", "LOOPSTORE_DIR_FILE="+dirFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	deadline := time.Now().Add(30 * time.Second)
	for dir == "" {
		if b, err := os.ReadFile(dirFile); err == nil && len(b) > 0 {
			dir = string(b)
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the child made no store within 30s")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if !mounted(dir) {
		t.Fatalf("%s not mounted by the child", dir)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline = time.Now().Add(30 * time.Second)
	for mounted(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still mounted 30s after its process died", dir)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// TestFreezeEndsAtItsLatest: a store frozen for at most a moment is
// thawed by its guard, though nobody calls Thaw (a process stuck writing
// there could not end otherwise).
func TestFreezeEndsAtItsLatest(t *testing.T) {
	Require(t)
	s := New(t, 16<<20)
	if err := s.Freeze(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// without the guard this write would wait for good
	if err := os.WriteFile(filepath.Join(s.Dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatalf("write after the guard's thaw: %v", err)
	}
	if err := s.Thaw(); err != nil {
		t.Errorf("Thaw after the guard thawed: %v", err)
	}
}
