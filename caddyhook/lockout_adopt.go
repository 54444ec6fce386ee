package caddyhook

import (
	"net/netip"
	"time"
)

// adopt copies the live entries of old, a table of the same handler under
// other settings, into t: a reload that changes a lockout setting keeps
// every locked address locked until the moment old would have released it,
// and keeps the failure counts of the others (judged from then on by t's
// settings: a lower threshold locks them at their next failure). Keys are
// reduced again with t's IPv6 prefix; entries that then coincide merge
// into the stronger one. old is not changed.
func (t *lockoutTable) adopt(old *lockoutTable, now time.Time) {
	ms := now.UnixMilli()
	var live []lockEntry
	for i := range old.shards {
		sh := &old.shards[i]
		sh.mu.Lock()
		for j := range sh.sets {
			for _, e := range sh.sets[j] {
				if e.start != 0 && ms < old.expiry(&e) {
					live = append(live, e)
				}
			}
		}
		sh.mu.Unlock()
	}
	for _, e := range live {
		e.key = t.keyFor(netip.AddrFrom16(e.key))
		t.merge(e, ms)
	}
}

// merge stores e in t, or combines it with the entry t already has for
// its key: the later lock end wins, and the higher failure count.
func (t *lockoutTable) merge(e lockEntry, now int64) {
	sh, s := t.locate(e.key)
	defer sh.mu.Unlock()
	cur := t.find(s, e.key, now)
	if cur == nil {
		*t.victim(s, now) = e
		return
	}
	end := func(x *lockEntry) int64 {
		if x.lockMs == 0 {
			return 0
		}
		return x.start + int64(x.lockMs)
	}
	lockEnd := max(end(cur), end(&e))
	cur.start = min(cur.start, e.start)
	cur.count = max(cur.count, e.count)
	if lockEnd != 0 {
		cur.lockMs = uint32(lockEnd - cur.start)
	}
}
