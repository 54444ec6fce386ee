// Package safefile checks the directory and file a database (a bbolt
// file: the spool's queue, the event log) is opened in, so that it is
// never opened through a symbolic link: bbolt would follow a link and
// write the data into its target, with the target's permissions. A
// directory anyone may write to without the sticky bit is refused too, as
// anyone could put such a link there.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Check refuses a directory dir or its file dir/name that is a symbolic
// link, a file that is not a regular file, and a directory that anyone
// may write to without the sticky bit. A directory or file that does not
// exist yet is fine (Prepare creates the directory, OpenNoFollow the
// file, never through a link).
func Check(dir, name string) error {
	fi, err := notLink(dir, "give the directory it points to")
	if fi == nil || err != nil {
		return err
	}
	if fi.IsDir() && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s: anyone may write to it (mode %v), so anyone could put a link to another file in place of %s; "+
			"make it writable by its owner only (chmod o-w), or use a directory of its own", dir, fi.Mode().Perm(), name)
	}
	path := filepath.Join(dir, name)
	fi, err = notLink(path, "it must be a regular file in "+dir)
	if fi == nil || err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	return nil
}

// notLink describes path without following a link: nil and no error when
// it does not exist, an error naming it (with advice) when it is a
// symbolic link.
func notLink(path, advice string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symbolic link: %s (a link would put the data wherever it points)", path, advice)
	}
	return fi, nil
}

// Prepare checks dir and dir/name (Check), creates dir (mode 0700) when
// missing and returns the file's path. It checks again once the
// directory is there, in case a link took its place meanwhile.
func Prepare(dir, name string) (string, error) {
	if err := Check(dir, name); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	return filepath.Join(dir, name), Check(dir, name)
}

// OpenNoFollow is os.OpenFile that does not follow a symbolic link at the
// end of name (where the platform can tell), so that a link put in place
// of the file after Check is refused, not followed. Its signature is
// bbolt's Options.OpenFile.
func OpenNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|noFollow, perm)
	if noFollow != 0 && errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: it must be a regular file", name)
	}
	return f, err
}
