//go:build !linux

package transform

import "time"

// threadCPUClock reports that per-thread CPU time is not available here:
// the heap check then charges a call with the whole process's
// allocations.
func threadCPUClock() (int32, bool) { return 0, false }

// cpuTime reads nothing.
func cpuTime(int32) (time.Duration, bool) { return 0, false }

// processCPUClock is unused here.
const processCPUClock = 0
