package lockout

import (
	"net/netip"
	"time"
)

// adopted is what a table under other settings knows about one
// address: the end of its lock (Unix milliseconds, 0 = not locked) or the
// failures it counts now.
type adopted struct {
	key      Key
	lockEnd  int64
	failures uint32
}

// Adopt copies the live entries of old, a table of the same handler under
// other settings, into t: a reload that changes a lockout setting keeps
// every locked address locked until the moment old would have released it,
// and keeps the failure counts of the others (counted in t's current
// bucket and judged from then on by t's settings: a lower threshold locks
// them at their next failure). Keys are reduced again with t's IPv6
// prefix; entries that then coincide merge into the stronger one. old is
// not changed.
func (t *Table) Adopt(old *Table, now time.Time) {
	ms := now.UnixMilli()
	var live []adopted
	old.each(func(e *entry) {
		if e.mark == 0 || ms >= old.expiry(e) {
			return
		}
		a := adopted{key: e.key, failures: old.failures(e, ms)}
		if e.until != 0 {
			a.lockEnd = old.lockEnd(e)
		}
		if a.lockEnd != 0 || a.failures != 0 {
			live = append(live, a)
		}
	})
	for _, a := range live {
		a.key = t.KeyOf(netip.AddrFrom16(a.key))
		t.merge(a, ms)
	}
}

// merge stores a in t, combined with the entry t already has for its key:
// the later lock end wins, else the higher failure count.
func (t *Table) merge(a adopted, ms int64) {
	sh, s := t.locate(a.key)
	defer sh.mu.Unlock()
	e := t.find(s, a.key, ms)
	if e == nil {
		e = t.victim(s, ms)
		*e = entry{key: a.key}
	} else {
		if end := t.lockEnd(e); end > a.lockEnd {
			a.lockEnd = end
		}
		a.failures = max(a.failures, t.failures(e, ms))
	}
	b := t.bucketOf(ms)
	e.mark = uint32(b + 1)
	e.hits = [buckets]uint8{}
	e.until = 0
	if a.lockEnd > ms {
		start := epoch + b*t.bucketMs
		e.until = lockSpan(a.lockEnd, start)
		return
	}
	e.hits[b%buckets] = uint8(min(a.failures, MaxCount))
}

// ApplyLock locks k up to until (a lock another node, or an earlier run,
// applied), unless it is locked at least that long already; it reports
// whether the table changed.
func (t *Table) ApplyLock(k Key, until time.Time) bool {
	now := time.Now()
	ip := netip.AddrFrom16(k)
	if left, locked := t.Locked(ip, now); locked && !now.Add(left).Before(until) {
		return false
	}
	t.merge(adopted{key: t.KeyOf(ip), lockEnd: until.UnixMilli()}, now.UnixMilli())
	return true
}
