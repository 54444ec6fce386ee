//go:build !linux

package cpuclock

import "time"

// Thread reports that per-thread CPU time is not available here.
func Thread() (int32, bool) { return 0, false }

// Process is unused here.
const Process = 0

// Read reads nothing.
func Read(int32) (time.Duration, bool) { return 0, false }
