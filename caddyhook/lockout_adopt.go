package caddyhook

import (
	"net/netip"
	"time"
)

// adoptedEntry is what a table under other settings knows about one
// address: the end of its lock (Unix milliseconds, 0 = not locked) or the
// failures it counts now.
type adoptedEntry struct {
	key      addrKey
	lockEnd  int64
	failures uint32
}

// adopt copies the live entries of old, a table of the same handler under
// other settings, into t: a reload that changes a lockout setting keeps
// every locked address locked until the moment old would have released it,
// and keeps the failure counts of the others (counted in t's current
// bucket and judged from then on by t's settings: a lower threshold locks
// them at their next failure). Keys are reduced again with t's IPv6
// prefix; entries that then coincide merge into the stronger one. old is
// not changed.
func (t *lockoutTable) adopt(old *lockoutTable, now time.Time) {
	ms := now.UnixMilli()
	var live []adoptedEntry
	old.each(func(e *lockEntry) {
		if e.mark == 0 || ms >= old.expiry(e) {
			return
		}
		a := adoptedEntry{key: e.key, failures: old.failures(e, ms)}
		if e.until != 0 {
			a.lockEnd = old.lockEnd(e)
		}
		if a.lockEnd != 0 || a.failures != 0 {
			live = append(live, a)
		}
	})
	for _, a := range live {
		a.key = t.keyFor(netip.AddrFrom16(a.key))
		t.merge(a, ms)
	}
}

// merge stores a in t, combined with the entry t already has for its key:
// the later lock end wins, else the higher failure count.
func (t *lockoutTable) merge(a adoptedEntry, ms int64) {
	sh, s := t.locate(a.key)
	defer sh.mu.Unlock()
	e := t.find(s, a.key, ms)
	if e == nil {
		e = t.victim(s, ms)
		*e = lockEntry{key: a.key}
	} else {
		if end := t.lockEnd(e); end > a.lockEnd {
			a.lockEnd = end
		}
		a.failures = max(a.failures, t.failures(e, ms))
	}
	b := t.bucketOf(ms)
	e.mark = uint32(b + 1)
	e.hits = [lockoutBuckets]uint8{}
	e.until = 0
	if a.lockEnd > ms {
		start := lockoutEpoch + b*t.bucketMs
		e.until = lockSpan(a.lockEnd, start)
		return
	}
	e.hits[b%lockoutBuckets] = uint8(min(a.failures, maxLockoutFailures))
}
