package caddyhook

import (
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// lockoutWays is the associativity of the lockout table: a key lives in one
// set of this many slots, so every lookup touches at most lockoutWays
// entries whatever the number of addresses.
const lockoutWays = 8

// lockoutShards splits the table into independently locked parts.
const lockoutShards = 256

// lockoutBuckets is the number of sub-windows an entry counts failures in:
// the failure window slides in steps of window/(lockoutBuckets-1).
const lockoutBuckets = 8

// lockoutEpoch is the origin of the bucket numbers (Unix milliseconds of
// 2024-01-01T00:00:00Z): with the shortest window (1s) a uint32 bucket
// number lasts until 2043, with the default (60s) for millennia.
const lockoutEpoch = 1704067200000

// maxLockoutFailures bounds auth_failures: one bucket counts at most this
// many failures.
const maxLockoutFailures = 255

// maxLockoutSlots bounds lockout_table_size (2 GiB of 32-byte entries).
const maxLockoutSlots = 1 << 26

// lockoutPolicy holds the lockout settings; the table is keyed by them so a
// reload with the same settings keeps its state.
type lockoutPolicy struct {
	maxFailures uint32
	window      time.Duration
	lockFor     time.Duration // how long the failure that reaches maxFailures locks
	v6Bits      int
	slots       int
}

// addrKey is a client address reduced to its lockout identity: an IPv4
// address, or an IPv6 address masked to the configured prefix.
type addrKey [16]byte

// lockEntry is one tracked address in 32 bytes. Failures are counted in
// lockoutBuckets buckets of bucketMs each, hits[n%lockoutBuckets] holding
// those of bucket n (bucket numbers count from lockoutEpoch); mark is the
// number of the newest bucket plus one (0 = empty slot). A failure counts
// while its bucket is one of the lockoutBuckets newest, so for at least
// the window and less than window×8/7: a sliding window. until, when
// non-zero, is the end of the lock in milliseconds after the start of
// bucket mark-1; failures are not counted while locked, and once the lock
// is over the address starts again from zero (as the reference gateway).
type lockEntry struct {
	key   addrKey
	mark  uint32
	until uint32
	hits  [lockoutBuckets]uint8
}

// lockSet is one associative set of the table.
type lockSet [lockoutWays]lockEntry

// lockShard is a mutex and its sets, allocated on first use so an idle
// table costs almost nothing.
type lockShard struct {
	mu   sync.Mutex
	sets []lockSet
	_    [40]byte // keep neighbouring shard mutexes off one cache line
}

// lockoutTable counts authentication failures per client address in a
// fixed amount of memory (slots × 32 bytes at most) over a sliding window:
// the failure that makes maxFailures within the window locks the address
// for lockFor from that failure. Lookups are O(1): one hash, one shard
// lock, one set scan. When a set is full the least harmful entry is
// evicted: expired first, then the fewest failures, and a locked address
// only when its whole set is locked.
type lockoutTable struct {
	policy       lockoutPolicy
	bucketMs     int64
	seed         maphash.Seed
	setsPerShard int
	shards       [lockoutShards]lockShard
	gates        gateStack
}

// lockGate is the cluster's say in the table's answers (cluster.go): an
// address it holds back is answered as locked, and a local failure is
// shared before it is counted, or refused when the address is held.
type lockGate interface {
	held(k addrKey) bool
	share(k addrKey, at time.Time) bool
}

// holdRetry is the Retry-After of an address a lockGate holds back (its
// hold ends when the node owning its count answers: within the engine's
// timeout).
const holdRetry = time.Second

// gateStack is the table's gates, the newest in use: a reload that opens
// another cluster connection adds one before the old one goes.
type gateStack struct {
	mu      sync.Mutex
	stack   []lockGate
	current atomic.Pointer[gateBox]
}

type gateBox struct{ lockGate }

// push makes g the gate in use.
func (s *gateStack) push(g lockGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stack = append(s.stack, g)
	s.current.Store(&gateBox{g})
}

// remove drops g; the newest remaining gate (if any) is used.
func (s *gateStack) remove(g lockGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.stack {
		if x == g {
			s.stack = append(s.stack[:i], s.stack[i+1:]...)
			break
		}
	}
	if n := len(s.stack); n > 0 {
		s.current.Store(&gateBox{s.stack[n-1]})
	} else {
		s.current.Store(nil)
	}
}

// gate returns the gate in use, or nil.
func (s *gateStack) gate() lockGate {
	if b := s.current.Load(); b != nil {
		return b.lockGate
	}
	return nil
}

// capacity is how many addresses the table holds (lockout_table_size,
// rounded to whole sets).
func (t *lockoutTable) capacity() int { return t.setsPerShard * lockoutShards * lockoutWays }

// newLockoutTable returns an empty table for p.
func newLockoutTable(p lockoutPolicy) *lockoutTable {
	// clamped to the bounds Validate enforces, so that a table provisioned
	// for a config that then fails validation costs nothing
	sets := min(max(p.slots, 0), maxLockoutSlots) / (lockoutShards * lockoutWays)
	if sets < 1 {
		sets = 1
	}
	if p.lockFor <= 0 {
		p.lockFor = p.window
	}
	w := p.window.Milliseconds()
	bucket := max((w+lockoutBuckets-2)/(lockoutBuckets-1), 1) // ceil(w/7)
	return &lockoutTable{policy: p, bucketMs: bucket, seed: maphash.MakeSeed(), setsPerShard: sets}
}

// bucketOf returns the number of the bucket that holds Unix millisecond ms.
func (t *lockoutTable) bucketOf(ms int64) int64 {
	return max(ms-lockoutEpoch, 0) / t.bucketMs
}

// keyFor reduces a client address to its table key.
func (t *lockoutTable) keyFor(ip netip.Addr) addrKey {
	ip = ip.Unmap()
	if ip.Is6() && t.policy.v6Bits < 128 {
		if p, err := ip.Prefix(t.policy.v6Bits); err == nil {
			ip = p.Addr()
		}
	}
	return ip.As16()
}

// locate returns the locked shard and the set for k; the caller unlocks.
func (t *lockoutTable) locate(k addrKey) (*lockShard, *lockSet) {
	h := maphash.Bytes(t.seed, k[:])
	sh := &t.shards[h%lockoutShards]
	sh.mu.Lock()
	if sh.sets == nil {
		sh.sets = make([]lockSet, t.setsPerShard)
	}
	return sh, &sh.sets[(h/lockoutShards)%uint64(t.setsPerShard)]
}

// lockEnd returns when e's lock ends, in Unix milliseconds, or 0 when e is
// not locked (the lock may be over: compare with the time).
func (t *lockoutTable) lockEnd(e *lockEntry) int64 {
	if e.until == 0 {
		return 0
	}
	return lockoutEpoch + int64(e.mark-1)*t.bucketMs + int64(e.until)
}

// expiry returns when e stops mattering, in Unix milliseconds: the end of
// its lock once locked, else when its newest bucket leaves the window.
func (t *lockoutTable) expiry(e *lockEntry) int64 {
	if e.until != 0 {
		return t.lockEnd(e)
	}
	return lockoutEpoch + (int64(e.mark-1)+lockoutBuckets)*t.bucketMs
}

// failures returns the failures e counts at Unix millisecond ms (0 for a
// locked entry, whose count no longer matters).
func (t *lockoutTable) failures(e *lockEntry, ms int64) uint32 {
	if e.until != 0 || e.mark == 0 {
		return 0
	}
	return e.count(t.bucketOf(ms))
}

// count sums the buckets of e that are inside the window in bucket cur.
func (e *lockEntry) count(cur int64) uint32 {
	newest := int64(e.mark) - 1
	n := uint32(0)
	for i := range int64(lockoutBuckets) {
		if b := newest - i; b >= 0 && cur-b < lockoutBuckets {
			n += uint32(e.hits[b%lockoutBuckets])
		}
	}
	return n
}

// find returns the live entry for k in s, or nil.
func (t *lockoutTable) find(s *lockSet, k addrKey, now int64) *lockEntry {
	for i := range s {
		e := &s[i]
		if e.mark != 0 && e.key == k {
			if now >= t.expiry(e) {
				*e = lockEntry{}
				return nil
			}
			return e
		}
	}
	return nil
}

// Locked reports whether ip is locked out at now and, if so, for how much
// longer. An address the cluster holds back counts as locked for
// holdRetry.
func (t *lockoutTable) Locked(ip netip.Addr, now time.Time) (time.Duration, bool) {
	k := t.keyFor(ip)
	if left, locked := t.lockedKey(k, now); locked {
		return left, true
	}
	if g := t.gates.gate(); g != nil && g.held(k) {
		return holdRetry, true
	}
	return 0, false
}

// lockedKey is Locked of the table's own entry for k.
func (t *lockoutTable) lockedKey(k addrKey, now time.Time) (time.Duration, bool) {
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	if e == nil || e.until == 0 {
		return 0, false
	}
	return time.Duration(t.lockEnd(e)-ms) * time.Millisecond, true
}

// Fail records one authentication failure of ip at now. It returns true
// when this failure locked the address. A failure of a locked address is
// not counted (the lock is not extended). now may be older than the
// address's newest failure (a failure reported late): it is counted in its
// bucket while that is still inside the window.
func (t *lockoutTable) Fail(ip netip.Addr, now time.Time) bool {
	_, newly := t.Record(ip, now)
	return newly
}

// Record is Fail that also tells whether the address is locked after the
// failure: left is the rest of its lock (0 = not locked) and newly says
// that this failure locked it. A failure that finds the address already
// locked (a concurrent request lost the race to the one that locked it)
// gets left > 0 and newly false; so does one the cluster refuses to share
// because the address is held back (left = holdRetry): it is not counted.
func (t *lockoutTable) Record(ip netip.Addr, now time.Time) (left time.Duration, newly bool) {
	return t.record(t.keyFor(ip), now, t.gates.gate())
}

// record counts a failure of k at now, shared through g first (nil: a
// failure another node shared, or no cluster).
func (t *lockoutTable) record(k addrKey, now time.Time, g lockGate) (left time.Duration, newly bool) {
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	if e != nil && e.until != 0 {
		return time.Duration(t.lockEnd(e)-ms) * time.Millisecond, false
	}
	if g != nil && !g.share(k, now) {
		return holdRetry, false // held: not counted, no slot taken
	}
	if e == nil {
		e = t.victim(s, ms)
		*e = lockEntry{key: k}
	}
	b := t.bucketOf(ms)
	if newest := int64(e.mark) - 1; b > newest {
		// slide: empty the buckets between the newest one and b
		for n := max(newest+1, b-lockoutBuckets+1); n <= b; n++ {
			e.hits[n%lockoutBuckets] = 0
		}
		e.mark = uint32(b + 1)
	} else if newest-b >= lockoutBuckets {
		return 0, false // older than the window
	}
	if e.hits[b%lockoutBuckets] < maxLockoutFailures {
		e.hits[b%lockoutBuckets]++
	}
	if e.count(int64(e.mark)-1) < t.policy.maxFailures {
		return 0, false
	}
	start := lockoutEpoch + int64(e.mark-1)*t.bucketMs
	e.until = lockSpan(ms+t.policy.lockFor.Milliseconds(), start)
	e.hits = [lockoutBuckets]uint8{}
	return time.Duration(t.lockEnd(e)-ms) * time.Millisecond, true
}

// lockSpan is the until of a lock ending at Unix millisecond end, counted
// from start: at least 1 (locked) and at most what a uint32 holds (about
// 49 days, far beyond the longest lock a config allows), never wrapped.
func lockSpan(end, start int64) uint32 {
	return uint32(min(max(end-start, 1), math.MaxUint32))
}

// Reset forgets ip (after a successful authentication, or to lift a lock).
func (t *lockoutTable) Reset(ip netip.Addr) {
	k := t.keyFor(ip)
	sh, s := t.locate(k)
	for i := range s {
		if s[i].key == k {
			s[i] = lockEntry{}
		}
	}
	sh.mu.Unlock()
}

// victim picks the slot a new key takes in s.
func (t *lockoutTable) victim(s *lockSet, now int64) *lockEntry {
	var best *lockEntry
	for i := range s {
		e := &s[i]
		if e.mark == 0 || now >= t.expiry(e) {
			return e
		}
		if best == nil || t.evictBefore(e, best, now) {
			best = e
		}
	}
	return best
}

// evictBefore orders live entries for eviction: unlocked before locked,
// then fewer failures, then older ones (the lock that ends first, the
// oldest newest failure).
func (t *lockoutTable) evictBefore(a, b *lockEntry, now int64) bool {
	if (a.until == 0) != (b.until == 0) {
		return a.until == 0
	}
	if a.until != 0 {
		return t.lockEnd(a) < t.lockEnd(b)
	}
	if fa, fb := t.failures(a, now), t.failures(b, now); fa != fb {
		return fa < fb
	}
	return a.mark < b.mark
}

// each calls f for every slot of the table, shard by shard, with the
// shard's lock held (f must not call back into the table).
func (t *lockoutTable) each(f func(e *lockEntry)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.sets {
			for k := range sh.sets[j] {
				f(&sh.sets[j][k])
			}
		}
		sh.mu.Unlock()
	}
}

// Active counts the addresses locked at now (for the metrics gauge).
func (t *lockoutTable) Active(now time.Time) int {
	ms := now.UnixMilli()
	n := 0
	t.each(func(e *lockEntry) {
		if e.mark != 0 && e.until != 0 && ms < t.lockEnd(e) {
			n++
		}
	})
	return n
}

// Destruct satisfies caddy.Destructor for the usage pool.
func (t *lockoutTable) Destruct() error { return nil }

// lockedAddr is one locked-out client for the admin API: an address, or an
// IPv6 prefix when the table groups IPv6 clients.
type lockedAddr struct {
	addr  string
	until time.Time
}

// Locks lists at most limit addresses locked at now, in no particular order.
func (t *lockoutTable) Locks(now time.Time, limit int) []lockedAddr {
	ms := now.UnixMilli()
	var out []lockedAddr
	t.each(func(e *lockEntry) {
		if end := t.lockEnd(e); len(out) < limit && e.mark != 0 && end != 0 && ms < end {
			out = append(out, lockedAddr{addr: t.keyString(e.key), until: time.UnixMilli(end)})
		}
	})
	return out
}

// Lift ends ip's lockout and forgets its failures, as a successful
// authentication would; it reports false when ip was not locked.
func (t *lockoutTable) Lift(ip netip.Addr, now time.Time) bool {
	if _, locked := t.lockedKey(t.keyFor(ip), now); !locked {
		return false
	}
	t.Reset(ip)
	return true
}

// keyString formats a table key: the IPv4 or IPv6 address, or the IPv6
// prefix when IPv6 clients are grouped.
func (t *lockoutTable) keyString(k addrKey) string {
	ip := netip.AddrFrom16(k).Unmap()
	if ip.Is6() && t.policy.v6Bits < 128 {
		return netip.PrefixFrom(ip, t.policy.v6Bits).String()
	}
	return ip.String()
}
