package transform

import (
	"path/filepath"
	"runtime"
	"time"
)

// Defaults applied to zero Options fields.
const (
	DefaultTimeout  = 100 * time.Millisecond
	DefaultMaxBytes = 8 << 20
)

// allocFactor scales MaxBytes into the heap-allocation budget the watchdog
// grants one call, never less than minAllocBudget; see watchdog.go for the
// reasoning.
const (
	allocFactor    = 4
	minAllocBudget = 16 << 20
)

// Options bounds one compiled program.
type Options struct {
	Timeout  time.Duration // per call, of CPU time where a thread CPU clock exists (watchdog.go); 0 → 100ms
	MaxBytes int64         // memory guard for strings/arrays built + result size; 0 → 8 MiB

	// Root confines the module and every file it imports; "" → the
	// directory of the module file. Callers pass the effective transforms
	// directory returned by ResolveDir.
	Root string

	// Runtimes caps the pooled goja runtimes of one program (a runtime is
	// not goroutine-safe, so this is the number of calls that can run at
	// once); 0 → 4×GOMAXPROCS, at least 8.
	Runtimes int
}

// normalize returns o with defaults applied; file is the module path.
func (o Options) normalize(file string) Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Root == "" {
		o.Root = filepath.Dir(file)
	}
	if o.Runtimes <= 0 {
		o.Runtimes = max(8, 4*runtime.GOMAXPROCS(0))
	}
	return o
}

// maxElems is the element cap for arrays built in one native step: a Go
// slice slot plus a small value costs about 16 bytes.
func (o Options) maxElems() int64 { return max(1, o.MaxBytes/16) }

// allocBudget is the heap allocation one call may cause before the
// watchdog stops it.
func (o Options) allocBudget() uint64 {
	return uint64(max(o.MaxBytes*allocFactor, minAllocBudget))
}
