package transform

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPUClock returns the CPU-time clock of the calling thread, which
// any thread of the process may read (Linux's MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED)). The caller must be locked to its thread.
func threadCPUClock() (int32, bool) {
	return int32(^uint32(syscall.Gettid())<<3 | 6), true
}

// processCPUClock is CLOCK_PROCESS_CPUTIME_ID, the CPU-time clock of the
// whole process.
const processCPUClock = 2

// cpuTime reads a CPU-time clock.
func cpuTime(clock int32) (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
