// Package loopstore gives a fault test a filesystem of its own: an ext4
// image, loop-mounted on a new directory, that the test can freeze
// (`fsfreeze -f`: every write blocks while reads go on, as on a disk that
// stalls) and thaw, or fill (as a full disk). A NATS server whose store
// lives there is a server alive but stalled: it answers its clients'
// PINGs while every JetStream write through it waits.
//
// It needs Linux, root and util-linux (losetup via mount -o loop,
// mkfs.ext4, fsfreeze). Every store is removed when its test ends, frozen
// or not: thawed, unmounted (the loop device detaches with it) and its
// image deleted. A watchdog process of its own does the same if the test
// process dies first (a test binary killed by -timeout runs no cleanup),
// so that no frozen filesystem outlives the test.
package loopstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names the variable that makes a machine unable to make a store a
// failure of the tests that need one (CI sets it), instead of a skip.
const Env = "CADDYHOOK_FAULT_TESTS"

// tools are the programs a store needs.
var tools = []string{"mount", "umount", "mkfs.ext4", "fsfreeze"}

// Check reports why this machine cannot make a store (not Linux, not
// root, a tool missing, no loop device), or nil when it can.
func Check() error {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		return errors.New("loop-mounted stores need Linux")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("loop-mounted stores need root (euid %d)", os.Geteuid())
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("loop-mounted stores need %s on PATH (Debian: util-linux, e2fsprogs)", t)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no /dev/loop-control: the kernel has no loop devices here (modprobe loop; a container needs --privileged): %v", err)
	}
	return nil
}

// Require ends t unless Check passes: a failure when Env is "require"
// (CI), else a skip that says why.
func Require(t testing.TB) {
	t.Helper()
	if err := Check(); err != nil {
		if os.Getenv(Env) == "require" {
			t.Fatalf("%v, and %s=require: this test stalls a disk and cannot run", err, Env)
		}
		t.Skipf("%v: the stalled-disk fault tests are skipped (CI runs them as root with %s=require)", err, Env)
	}
}

// Store is one mounted filesystem.
type Store struct {
	// Dir is where it is mounted.
	Dir string

	img      string
	mu       sync.Mutex
	guard    *exec.Cmd // thaws the store at the latest when its time is up (nil: not frozen)
	watchdog *exec.Cmd
	release  io.WriteCloser // closing it starts the watchdog's cleanup
	done     chan error
}

// New makes a store of size bytes (a sparse image in the system's temp
// directory, formatted ext4) for t; t's cleanup removes it. Call Require
// first: New fails t when the machine cannot.
func New(t testing.TB, size int64) *Store {
	t.Helper()
	s, err := Make(size)
	if err != nil {
		t.Fatalf("loop store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Remove(); err != nil {
			t.Errorf("loop store %s: %v", s.Dir, err)
		}
	})
	return s
}

// Make makes a store of size bytes outside a test (a fault harness); the
// caller removes it with Remove.
func Make(size int64) (*Store, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "loopstore")
	if err != nil {
		return nil, err
	}
	s := &Store{Dir: filepath.Join(base, "mnt"), img: filepath.Join(base, "store.img"), done: make(chan error, 1)}
	fail := func(err error) (*Store, error) {
		_ = os.RemoveAll(base)
		return nil, err
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(s.img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fail(err)
	}
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", s.img); err != nil {
		return fail(err)
	}
	// The watchdog holds the cleanup: it waits for its stdin to close
	// (Remove closes it, and so does the kernel when this process dies
	// however it dies), then thaws, unmounts (lazily if a process that
	// outlived the test still holds a file there) and deletes. Its own
	// process group: a Ctrl-C to the test does not stop it first.
	script := `read _ || true
fsfreeze -u "$1" 2>/dev/null
umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null
rm -rf "$2"`
	s.watchdog = exec.Command("sh", "-c", script, "loopstore-watchdog", s.Dir, base)
	s.watchdog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.release, err = s.watchdog.StdinPipe(); err != nil {
		return fail(err)
	}
	if err := s.watchdog.Start(); err != nil {
		return fail(err)
	}
	go func() { s.done <- s.watchdog.Wait() }()
	if err := run("mount", "-o", "loop", s.img, s.Dir); err != nil {
		_ = s.Remove()
		return nil, err
	}
	return s, nil
}

// Freeze stalls every write to the store (reads go on) until Thaw, and
// at most for max: a guard process of its own thaws it then, even if this
// process is gone or stuck. (A process with a thread blocked writing into
// a frozen store cannot end, so the watchdog, which waits for its end,
// would never thaw it: a test whose cleanup stops a server before thawing
// its store would hang for good.)
func (s *Store) Freeze(max time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard != nil {
		return nil
	}
	guard := exec.Command("sh", "-c", `sleep "$2"; fsfreeze -u "$1" 2>/dev/null`, "loopstore-thaw-guard", s.Dir,
		strconv.FormatFloat(max.Seconds(), 'f', 3, 64))
	guard.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := guard.Start(); err != nil {
		return err
	}
	if err := run("fsfreeze", "-f", s.Dir); err != nil {
		_ = guard.Process.Kill()
		_ = guard.Wait()
		return err
	}
	s.guard = guard
	return nil
}

// Thaw lets the writes held by Freeze go on.
func (s *Store) Thaw() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.guard == nil {
		return nil
	}
	_ = s.guard.Process.Kill()
	_ = s.guard.Wait()
	s.guard = nil
	if err := run("fsfreeze", "-u", s.Dir); err != nil && !strings.Contains(err.Error(), "Invalid argument") {
		return err // (EINVAL: not frozen any more, the guard thawed it)
	}
	return nil
}

// Fill writes a file into the store until the disk is full (ENOSPC), as
// a disk that filled up; removing the file it returns frees the space.
func (s *Store) Fill() (string, error) {
	name := filepath.Join(s.Dir, "fill")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// smaller and smaller writes: a big one fails while the filesystem
	// still has room for small ones (a server's next record)
	for size := 1 << 20; size > 0; size /= 8 {
		buf := make([]byte, size)
		for {
			_, err := f.Write(buf)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return name, err
			}
		}
	}
	return name, f.Sync()
}

// Remove thaws, unmounts and deletes the store, and waits for it (at
// most a minute).
func (s *Store) Remove() error {
	if s.release == nil {
		return nil
	}
	if err := s.Thaw(); err != nil {
		return err
	}
	_ = s.release.Close()
	s.release = nil
	var err error
	select {
	case err = <-s.done:
	case <-time.After(time.Minute):
		return fmt.Errorf("cleanup of %s did not finish within a minute", s.Dir)
	}
	if err != nil {
		return fmt.Errorf("cleanup of %s: %w", s.Dir, err)
	}
	if mounted(s.Dir) {
		return fmt.Errorf("%s is still mounted after the cleanup", s.Dir)
	}
	return nil
}

// mounted reports whether dir is a mount point now.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// run runs a tool, its output in the error.
func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
