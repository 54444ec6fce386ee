package transform

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCacheRecompiles: the cache returns the same program until the
// module or one of its imports changes, and not for a mere touch.
func TestCacheRecompiles(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "m.ts", `import { v } from "./lib"; export default () => ({ v });`)
	lib := writeFile(t, dir, "lib.ts", `export const v = "one";`)
	c := NewCache()
	value := func(p *Program) any {
		t.Helper()
		out, err := p.Run(context.Background(), Input{})
		if err != nil {
			t.Fatal(err)
		}
		return out["v"]
	}
	p1, err := c.Program(file, "", Options{Timeout: hangBound})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Program(file, "", Options{Timeout: hangBound})
	if err != nil || p2 != p1 {
		t.Fatalf("second Program = %p, %v; want the cached %p", p2, err, p1)
	}
	// A touch (new mtime, same content) keeps the program.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(lib, future, future); err != nil {
		t.Fatal(err)
	}
	if p3, _ := c.Program(file, "", Options{Timeout: hangBound}); p3 != p1 {
		t.Fatal("touching an import recompiled")
	}
	// Same size, same mtime, different content: still detected.
	st, _ := os.Stat(lib)
	writeFile(t, dir, "lib.ts", `export const v = "two";`)
	if err := os.Chtimes(lib, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	p4, err := c.Program(file, "", Options{Timeout: hangBound})
	if err != nil || p4 == p1 || value(p4) != "two" {
		t.Fatalf("after editing the import: %p (old %p), %v", p4, p1, err)
	}
	if value(p1) != "one" {
		t.Fatal("the old program changed behaviour")
	}
	// The entry changes.
	writeFile(t, dir, "m.ts", `import { v } from "./lib"; export default () => ({ v: v + "!" });`)
	p5, err := c.Program(file, "", Options{Timeout: hangBound})
	if err != nil || value(p5) != "two!" {
		t.Fatalf("after editing the entry: %v", err)
	}
	// A broken edit fails; the old program still runs; fixing it recovers.
	writeFile(t, dir, "lib.ts", `export const v = ;`)
	if _, err := c.Program(file, "", Options{Timeout: hangBound}); err == nil {
		t.Fatal("broken import compiled")
	}
	if value(p5) != "two!" {
		t.Fatal("old program broken by a failed recompile")
	}
	writeFile(t, dir, "lib.ts", `export const v = "three";`)
	if p6, err := c.Program(file, "", Options{Timeout: hangBound}); err != nil || value(p6) != "three!" {
		t.Fatalf("after fixing: %v", err)
	}
	// A deleted import forces a recompile, which fails.
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Program(file, "", Options{Timeout: hangBound}); err == nil {
		t.Fatal("compiled with a missing import")
	}
}

// TestCacheKeys: export and options are part of the key.
func TestCacheKeys(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "m.js", `export const a = () => ({ w: "a" }); export default () => ({ w: "d" });`)
	c := NewCache()
	pa, err := c.Program(file, "a", Options{Timeout: hangBound})
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.Program(file, "", Options{Timeout: hangBound})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := c.Program(file, "", Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if pa == pd || pd == pt {
		t.Fatal("different exports or options share a program")
	}
	for p, want := range map[*Program]string{pa: "a", pd: "d", pt: "d"} {
		if out, err := p.Run(context.Background(), Input{}); err != nil || out["w"] != want {
			t.Fatalf("Run = %v, %v; want %q", out, err, want)
		}
	}
}

// TestCacheConcurrent: concurrent lookups of one module agree on one
// program.
func TestCacheConcurrent(t *testing.T) {
	file := writeFile(t, t.TempDir(), "m.js", `export default () => ({})`)
	c := NewCache()
	var wg sync.WaitGroup
	progs := make([]*Program, 16)
	for i := range progs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p, err := c.Program(file, "", Options{Timeout: hangBound})
			if err != nil {
				t.Error(err)
			}
			progs[i] = p
		}(i)
	}
	wg.Wait()
	for _, p := range progs[1:] {
		if p != progs[0] {
			t.Fatal("concurrent lookups compiled twice")
		}
	}
}

// TestProgramCleanup: idle runtimes' worker goroutines end once their
// program is unreachable.
func TestProgramCleanup(t *testing.T) {
	file := writeFile(t, t.TempDir(), "m.js", `export default () => ({})`)
	func() {
		p, err := Compile(file, "", Options{Runtimes: 4})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = p.Run(context.Background(), Input{})
			}()
		}
		wg.Wait()
		if workers() == 0 {
			t.Fatal("no worker goroutines were started")
		}
		runtime.KeepAlive(p)
	}()
	// Every program of this test binary is unreachable by now.
	waitUntil(t, "the runtime workers of unreachable programs to end", func() bool {
		runtime.GC()
		return workers() == 0
	})
}

// workers counts the goroutines parked in or running vm.serve.
func workers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "transform.(*vm).serve(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestCompileRelativePath: a relative module path works and names the
// module relative to its root in messages.
func TestCompileRelativePath(t *testing.T) {
	p, err := Compile(filepath.Join("..", "..", "testdata", "transforms", "skip.js"), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(p.File()) || p.name != "skip.js" {
		t.Fatalf("File() = %q, name %q", p.File(), p.name)
	}
}
