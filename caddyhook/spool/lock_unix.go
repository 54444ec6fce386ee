//go:build unix

package spool

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/caddyhook/caddyhook/internal/safefile"
)

// fileLock is the exclusive lock bbolt itself takes on the database file
// (flock), held while the file is checked, salvaged or moved aside.
type fileLock struct{ f *os.File }

// lockRetry is how often a held lock is tried again.
const lockRetry = 50 * time.Millisecond

// lockFile opens (creating) path and locks it exclusively, waiting up to
// timeout; a lock still held then is ErrLocked.
func lockFile(path string, timeout time.Duration) (*fileLock, error) {
	f, err := safefile.OpenNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: opening %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || !time.Now().Before(deadline) {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, path)
			}
			return nil, fmt.Errorf("spool: locking %s: %w", path, err)
		}
		time.Sleep(lockRetry)
	}
}

// release unlocks and closes the file.
func (l *fileLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
