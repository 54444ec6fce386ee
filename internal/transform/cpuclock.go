package transform

import "github.com/caddyhook/caddyhook/internal/cpuclock"

// The CPU-time clocks the watchdog charges a call with (internal/cpuclock):
// the call's worker thread's (the call keeps its thread, Program.run) and
// the process's. Where no thread clock exists (not Linux) the heap check
// charges a call with the whole process's allocations.
var (
	threadCPUClock = cpuclock.Thread
	cpuTime        = cpuclock.Read
)

const processCPUClock = cpuclock.Process
