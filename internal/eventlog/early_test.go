package eventlog

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestEarlyUpdatesBounded reproduces issue 34 item B1 in the log: one
// outcome message replayed again and again reaches Update as a fresh
// update of an action the log does not hold, each carrying its own copy
// of the decoded message. Before, the updates of one action were kept
// without bound (the buffer counted actions only): 200,000 replays kept
// 200,000 updates and their messages. Now the buffer holds at most
// maxEarlyPerAction updates of an action and maxEarly in all, within
// maxEarlyBytes, the heap stays within a few MiB, and the newest updates
// still apply when the event is accepted.
func TestEarlyUpdatesBounded(t *testing.T) {
	const replays = 200_000
	message := strings.Repeat("gateway status 502: upstream unavailable ", 8)
	tests := []struct {
		name   string
		action func(i int) string
	}{
		{"one action", func(int) string { return "a1" }},
		{"an action each", func(i int) string { return "x" + strconv.Itoa(i) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := New(Bounds{}, Options{})
			before := liveHeap()
			for i := range replays {
				decoded := strings.Clone(message) // each replay decodes its own copy
				attempts := i + 1
				l.Update(tc.action(i), func(d *Dispatch) bool {
					d.State, d.Error, d.Attempts = StateRetrying, decoded, attempts
					return true
				})
			}
			grew := int64(liveHeap()) - int64(before)
			l.mu.Lock()
			count, bytes := l.early.count, l.early.bytes
			l.mu.Unlock()
			t.Logf("%d replays: %d updates kept, %d bytes charged; heap %+d KiB", replays, count, bytes, grew>>10)
			if count > maxEarly || bytes > maxEarlyBytes {
				t.Fatalf("%d updates, %d bytes kept; bounds %d, %d", count, bytes, maxEarly, maxEarlyBytes)
			}
			if grew > 8<<20 {
				t.Fatalf("the heap grew by %d MiB", grew>>20)
			}
			last := tc.action(replays - 1)
			l.Accept(accepted(last, time.Now(), 0))
			ev, _, _ := l.Get(last)
			if ev.State != StateRetrying || ev.Dispatch[0].Attempts != replays {
				t.Fatalf("accepted as %s after %d attempts, want the last update (retrying, %d)", ev.State, ev.Dispatch[0].Attempts, replays)
			}
			runtime.KeepAlive(l)
		})
	}
}
