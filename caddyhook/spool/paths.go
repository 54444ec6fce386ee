package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkPaths refuses a spool directory or spool file (path, inside dir)
// that is a symbolic link, a spool file that is not a regular file, and a
// directory that anyone may write to without the sticky bit: bbolt would
// follow a link and write the queue into its target, with the target's
// permissions, and in such a directory anyone could put a link there. A
// directory or file that does not exist yet is fine (Open creates it,
// never through a link: see openNoFollow).
func checkPaths(dir, path string) error {
	fi, err := notLink(dir, "give the directory it points to")
	if fi == nil || err != nil {
		return err
	}
	if fi.IsDir() && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("spool: %s: anyone may write to it (mode %v), so anyone could put a link to another file in place of %s; "+
			"make it writable by its owner only (chmod o-w), or use a directory of its own", dir, fi.Mode().Perm(), DBFile)
	}
	fi, err = notLink(path, "the spool file must be a regular file in the spool directory")
	if fi == nil || err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("spool: %s is not a regular file (%v)", path, fi.Mode().Type())
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
		return nil, fmt.Errorf("spool: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("spool: %s is a symbolic link: %s (a link would put the queue wherever it points)", path, advice)
	}
	return fi, nil
}

// prepareDir checks dir and its spool file (checkPaths), creates dir
// when missing and returns the spool file's path. It checks again once
// the directory is there, in case a link took its place meanwhile.
func prepareDir(dir string) (string, error) {
	path := filepath.Join(dir, DBFile)
	if err := checkPaths(dir, path); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool: creating %s: %w", dir, err)
	}
	return path, checkPaths(dir, path)
}

// openNoFollow is os.OpenFile that does not follow a symbolic link at the
// end of name (where the platform can tell), so that a link put in place
// of the spool file after checkPaths is refused, not followed.
func openNoFollow(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|noFollow, perm)
	if noFollow != 0 && errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("spool: %s is a symbolic link: the spool file must be a regular file in the spool directory", name)
	}
	return f, err
}
