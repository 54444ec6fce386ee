package eventlog

import (
	"net/netip"
	"time"
)

// rowKey identifies an aggregated rejection row: one client address (the
// lockout key; the zero key is the overflow row of a full table), status
// and reason, in one minute.
type rowKey struct {
	minute int64
	addr   [16]byte
	status int
	reason string
}

// row is the count of one rowKey's rejections.
type row struct {
	seq     uint64
	key     rowKey
	client  netip.Addr
	bits    int
	first   int64 // unix nanoseconds
	last    int64
	count   uint64
	hook    string // the last hook name refused
	changed uint64 // the log's row version at the last count
}

// RejectionJSON is an aggregated rejection row as the admin API shows it.
type RejectionJSON struct {
	Type   string    `json:"type"` // "rejections"
	Cursor string    `json:"cursor"`
	Time   time.Time `json:"time"` // the first rejection of the row
	Last   time.Time `json:"last"`
	Minute time.Time `json:"minute"`
	// Client is the address (or IPv6 prefix) refused, or "other
	// addresses" for the rejections counted while the table was full.
	Client string `json:"client"`
	Status int    `json:"status"`
	Reason string `json:"reason"`
	Hook   string `json:"hook,omitempty"`
	Count  uint64 `json:"count"`
	// Node is the node that refused them (set in a cluster).
	Node string `json:"node,omitempty"`
}

// overflowClient names the overflow row's addresses.
const overflowClient = "other addresses"

// maxOverflowRows bounds the overflow rows of a minute: past it, the
// minute's further refusals of another status or reason are counted in
// one row of status 0 and reason otherReasons. With it the table holds at
// most MaxRejections rows plus maxOverflowRows+1 of the current minute
// (those of earlier minutes go first when the table is over its bound).
const maxOverflowRows = 16

// otherReasons is the reason of a minute's last overflow row.
const otherReasons = "other reasons"

// view returns r's JSON form; the caller holds the log's lock.
func (r *row) view() RejectionJSON {
	c := overflowClient
	if r.client.IsValid() {
		c = ClientString(r.client, r.bits)
	}
	return RejectionJSON{Type: "rejections", Cursor: cursorOf(time.Unix(0, r.first), r.seq), Time: time.Unix(0, r.first).UTC(),
		Last: time.Unix(0, r.last).UTC(), Minute: time.Unix(r.key.minute*60, 0).UTC(), Client: c,
		Status: r.key.status, Reason: r.key.reason, Hook: r.hook, Count: r.count}
}

// rejections is the table of rows: a map by key and the rows in the order
// they were made (which is seq order), oldest first.
type rejections struct {
	rows    map[rowKey]*row
	order   []*row
	head    int
	version uint64 // bumped on every count
	// overflow rows made in the minute overflowMinute
	overflowMinute int64
	overflowRows   int
}

// maxRowHook bounds the hook name kept with a row.
const maxRowHook = 128

// Refusal is one refused request: when, from which client (Key is its
// lockout key, Bits its IPv6 grouping), the status and reason answered,
// the hook name asked for and whether the address was locked out.
type Refusal struct {
	Time   time.Time
	Client netip.Addr
	Bits   int
	Key    [16]byte
	Status int
	Reason string
	Hook   string
	Locked bool
}

// Reject counts one refused request. A row
// is made per key, status and reason and minute; when the table is full
// the oldest row goes if it is from an earlier minute, else the rejection
// is counted in the minute's overflow row of its status and reason
// ("other addresses"), so that a flood from many addresses never evicts
// what the table already shows; past maxOverflowRows such rows, in the
// minute's row of other reasons, so that distinct reasons cannot grow
// the table either. It never touches the accepted events.
func (l *Log) Reject(f Refusal) {
	ns := f.Time.UnixNano()
	k := rowKey{minute: ns / int64(time.Minute), addr: f.Key, status: f.Status, reason: f.Reason}
	ip, hook := f.Client, f.Hook
	kind := seriesRejected
	if f.Locked {
		kind = seriesLocked
	}
	l.series.observe(f.Time, kind, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &l.rej
	t.version++
	if r := t.rows[k]; r != nil {
		r.count++
		r.last = ns
		r.changed = t.version
		if hook != r.hook {
			r.hook = clipHook(hook)
		}
		return
	}
	l.trimRows(ns)
	overflow := false
	if len(t.rows) >= l.bounds.MaxRejections {
		if old := t.order[t.head]; old.key.minute < k.minute {
			l.dropRow()
		} else {
			k.addr = [16]byte{}
			ip, overflow = netip.Addr{}, true
			if k.minute > t.overflowMinute {
				t.overflowMinute, t.overflowRows = k.minute, 0
			}
			// (a refusal timed in an earlier minute, racing the minute's
			// turn, goes to that minute's row of other reasons)
			if t.rows[k] == nil && (k.minute < t.overflowMinute || t.overflowRows >= maxOverflowRows) {
				k.status, k.reason = 0, otherReasons
			}
			if r := t.rows[k]; r != nil {
				r.count++
				r.last = ns
				r.changed = t.version
				return
			}
		}
	}
	if overflow && k.minute == t.overflowMinute {
		t.overflowRows++
	}
	l.seq++
	r := &row{seq: l.seq, key: k, client: ip, bits: f.Bits, first: ns, last: ns, count: 1, hook: clipHook(hook), changed: t.version}
	if t.rows == nil {
		t.rows = map[rowKey]*row{}
	}
	t.rows[k] = r
	t.order = append(t.order, r)
}

// clipHook bounds a refused hook name (it is whatever was sent).
func clipHook(h string) string {
	if len(h) > maxRowHook {
		return h[:maxRowHook]
	}
	return h
}

// dropRow removes the oldest row; l.mu is held.
func (l *Log) dropRow() {
	t := &l.rej
	r := t.order[t.head]
	t.order[t.head] = nil
	t.head++
	delete(t.rows, r.key)
	if t.head > 1024 && t.head*2 > len(t.order) {
		t.order = append([]*row(nil), t.order[t.head:]...)
		t.head = 0
	}
}

// trimRows drops rows past the retention, and rows of earlier minutes
// while the table is over its bound (the current minute's rows stay: a
// flood beyond the bound is counted in the overflow rows); l.mu is held.
func (l *Log) trimRows(ns int64) {
	t := &l.rej
	oldest, minute := ns-int64(l.bounds.Retain), ns/int64(time.Minute)
	for t.head < len(t.order) {
		r := t.order[t.head]
		if r.last >= oldest && (len(t.rows) <= l.bounds.MaxRejections || r.key.minute >= minute) {
			return
		}
		l.dropRow()
	}
}
