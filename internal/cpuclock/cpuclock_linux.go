package cpuclock

import (
	"syscall"
	"time"
	"unsafe"
)

// Thread returns the CPU-time clock of the calling thread, which any
// thread of the process may read (Linux's MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED)). The caller must be locked to its thread
// (runtime.LockOSThread) for as long as the clock stands for its work.
func Thread() (int32, bool) {
	return int32(^uint32(syscall.Gettid())<<3 | 6), true
}

// Process is CLOCK_PROCESS_CPUTIME_ID, the CPU-time clock of the whole
// process.
const Process = 2

// Read reads a CPU-time clock.
func Read(clock int32) (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
