//go:build !linux

package verify

import "time"

// epoch anchors threadCPU's wall-time fallback.
var epoch = time.Now()

// threadCPU falls back to wall time where the thread's CPU clock is not
// read.
func threadCPU() time.Duration { return time.Since(epoch) }
