package eventlog

import (
	"strconv"
	"testing"
	"time"
)

// TestRejectionRowsBoundedInTotal reproduces issue 34 item B11: with the
// table full of the current minute's rows, refusals with ever new
// reasons each made an overflow row of their own (the overflow row is
// per status and reason), so rows grew past max_rejections without
// bound: 20,000 distinct reasons made 20,000 more rows. Now the minute
// has at most maxOverflowRows overflow rows by status and reason and one
// of other reasons; every refusal is still counted, and earlier minutes'
// rows go first when the next minute starts.
func TestRejectionRowsBoundedInTotal(t *testing.T) {
	const max, flood = 1000, 20_000
	l, _ := New(Bounds{MaxRejections: max}, Options{})
	minute := time.Now().Truncate(time.Minute)
	for i := range max {
		l.Reject(refusal(i, minute))
	}
	for i := range flood {
		r := refusal(max+i, minute.Add(time.Second))
		r.Status, r.Reason = 502, "gateway answered: "+strconv.Itoa(i)
		l.Reject(r)
	}
	rows, counted := func() (int, uint64) {
		l.mu.Lock()
		defer l.mu.Unlock()
		var n uint64
		for _, r := range l.rej.rows {
			n += r.count
		}
		return len(l.rej.rows), n
	}()
	if rows > max+maxOverflowRows+1 || counted != max+flood {
		t.Fatalf("%d rows counting %d refusals; want at most %d rows counting %d", rows, counted, max+maxOverflowRows+1, max+flood)
	}
	other := entries(l, Filter{Reason: otherReasons, Limit: 10})
	if len(other) != 1 || other[0].(RejectionJSON).Count != flood-maxOverflowRows || other[0].(RejectionJSON).Client != overflowClient {
		t.Fatalf("rows of other reasons: %+v", other)
	}
	// the next minute: the table is back within its bound
	l.Reject(refusal(1, minute.Add(time.Minute)))
	if l.mu.Lock(); len(l.rej.rows) > max {
		t.Errorf("%d rows in the next minute, bound %d", len(l.rej.rows), max)
	}
	l.mu.Unlock()
}
