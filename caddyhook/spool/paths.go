package spool

import (
	"fmt"

	"github.com/caddyhook/caddyhook/internal/safefile"
)

// prepareDir checks the spool directory and its spool file, creates the
// directory when missing and returns the spool file's path: a directory
// or spool file that is a symbolic link, a spool file that is not a
// regular file, and a directory anyone may write to without the sticky
// bit are refused (safefile.Prepare), as bbolt would follow a link and
// write the queue into its target. The file itself is opened with
// safefile.OpenNoFollow, never through a link.
func prepareDir(dir string) (string, error) {
	path, err := safefile.Prepare(dir, DBFile)
	if err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	return path, nil
}
