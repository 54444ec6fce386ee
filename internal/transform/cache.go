package transform

import (
	"os"
	"sync"
)

// Cache compiles modules once and recompiles when the file (or any bundled
// import) changed (size or content hash). Safe for concurrent use; meant to
// be shared across config reloads (for example through a caddy.UsagePool).
//
// All programs of a cache share one watchdog goroutine. A program that is
// replaced after a change keeps working for whoever still holds it.
type Cache struct {
	mu      sync.Mutex
	entries map[cacheKey]*Program
	watch   *watchdog
}

// cacheKey identifies a compiled program.
type cacheKey struct {
	file   string
	export string
	opts   Options
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{entries: make(map[cacheKey]*Program), watch: newWatchdog()}
}

// Program returns the compiled program for file+export (compiling on first use or on change).
// A file counts as changed when its size or content hash differs from
// what was compiled; a touched but identical file keeps the program. A
// failed recompile returns the error and leaves programs already handed
// out working; the next call retries.
func (c *Cache) Program(file, export string, opts Options) (*Program, error) {
	key := cacheKey{file: file, export: export, opts: opts}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.entries[key]; ok && p.unchanged() {
		return p, nil
	}
	prog, err := compile(file, export, opts, c.watch)
	if err != nil {
		return nil, err
	}
	c.entries[key] = prog
	return prog, nil
}

// unchanged reports whether every bundled file still has the size and
// content hash it was compiled from. Content is always compared: an edit
// within the modification-time granularity would keep size and mtime.
func (p *Program) unchanged() bool {
	for _, f := range p.inputs {
		fi, err := os.Stat(f.path)
		if err != nil || fi.Size() != f.size {
			return false
		}
		_, st, err := readState(f.path)
		if err != nil || st.hash != f.hash {
			return false
		}
	}
	return true
}
