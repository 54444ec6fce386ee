package transform

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

// maxSourceBytes bounds one module or imported file.
const maxSourceBytes = 16 << 20

// fileState fingerprints one bundled file as it was compiled.
type fileState struct {
	path string
	size int64
	hash [sha256.Size]byte
}

// readState reads path (a confined, real path) and fingerprints it.
func readState(path string) ([]byte, fileState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileState{}, pathError(err, path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileState{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fileState{}, fmt.Errorf("%s is not a regular file", fi.Name())
	}
	src, err := io.ReadAll(io.LimitReader(f, maxSourceBytes+1))
	if err != nil {
		return nil, fileState{}, err
	}
	if len(src) > maxSourceBytes {
		return nil, fileState{}, fmt.Errorf("%s is larger than %d bytes", fi.Name(), maxSourceBytes)
	}
	return src, fileState{path: path, size: int64(len(src)), hash: sha256.Sum256(src)}, nil
}
