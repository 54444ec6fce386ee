//go:build !unix

package spool

import (
	"fmt"
	"os"
	"time"

	"github.com/caddyhook/caddyhook/internal/safefile"
)

// fileLock holds the database file open while it is checked; on this
// platform only bbolt's own lock (taken afterwards) guards it.
type fileLock struct{ f *os.File }

// lockFile opens (creating) path.
func lockFile(path string, _ time.Duration) (*fileLock, error) {
	f, err := safefile.OpenNoFollow(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: opening %s: %w", path, err)
	}
	return &fileLock{f: f}, nil
}

// release closes the file.
func (l *fileLock) release() { _ = l.f.Close() }
