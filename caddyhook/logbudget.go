package caddyhook

import (
	"sync/atomic"
	"time"
)

// rejectLogsPerSecond bounds the "hook request rejected" lines a handler
// writes per second. Most rejections (401, 405, a query token) happen
// before authentication, so without a bound every request of a flood
// would cost a log write and the disk would fill at the attacker's rate.
// The metrics still count every rejection.
const rejectLogsPerSecond = 20

// logBudget is a per-second allowance of log lines. A nil budget allows
// every line.
type logBudget struct {
	second     atomic.Int64 // the Unix second the allowance is for
	used       atomic.Int64
	suppressed atomic.Uint64 // lines left out since the last one written
}

// allow reports whether a line may be written at now and, if so, how many
// lines were left out before it. Lines are counted without locks; at a
// second boundary a few may slip through twice, which is harmless.
func (b *logBudget) allow(now time.Time) (ok bool, suppressed uint64) {
	if b == nil {
		return true, 0
	}
	if sec, old := now.Unix(), b.second.Load(); sec != old && b.second.CompareAndSwap(old, sec) {
		b.used.Store(0)
	}
	if b.used.Add(1) > rejectLogsPerSecond {
		b.suppressed.Add(1)
		return false, 0
	}
	return true, b.suppressed.Swap(0)
}
