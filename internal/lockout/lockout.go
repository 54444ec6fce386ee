package lockout

import (
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ways is the associativity of the lockout table: a key lives in one
// set of this many slots, so every lookup touches at most ways
// entries whatever the number of addresses.
const ways = 8

// numShards splits the table into independently locked parts.
const numShards = 256

// buckets is the number of sub-windows an entry counts failures in:
// the failure window slides in steps of window/(buckets-1).
const buckets = 8

// epoch is the origin of the bucket numbers (Unix milliseconds of
// 2024-01-01T00:00:00Z): with the shortest window (1s) a uint32 bucket
// number lasts until 2043, with the default (60s) for millennia.
const epoch = 1704067200000

// MaxCount bounds Policy.MaxFailures (auth_failures): one bucket counts
// at most this many failures.
const MaxCount = 255

// MaxSlots bounds lockout_table_size (2 GiB of 32-byte entries).
const MaxSlots = 1 << 26

// DefaultSlots is lockout_table_size's default (64 MiB).
const DefaultSlots = 1 << 21

// MinSlots is the smallest table: one set per shard.
const MinSlots = numShards * ways

// Policy is a table's settings; a handler keys its table by them so a
// reload with the same settings keeps its state.
type Policy struct {
	MaxFailures uint32        // the failure that makes this many within Window locks
	Window      time.Duration // how long a failure counts
	LockFor     time.Duration // how long the locking failure locks (0: Window)
	V6Bits      int           // IPv6 clients are grouped by this prefix length
	Slots       int           // the addresses the table holds (rounded to whole sets)
}

// Key is a client address reduced to its lockout identity: an IPv4
// address, or an IPv6 address masked to the configured prefix.
type Key [16]byte

// entry is one tracked address in 32 bytes. Failures are counted in
// `buckets` buckets of bucketMs each, hits[n%buckets] holding
// those of bucket n (bucket numbers count from epoch); mark is the
// number of the newest bucket plus one (0 = empty slot). A failure counts
// while its bucket is one of the buckets newest, so for at least
// the window and less than window×8/7: a sliding window. until, when
// non-zero, is the end of the lock in milliseconds after the start of
// bucket mark-1; failures are not counted while locked, and once the lock
// is over the address starts again from zero (as the reference gateway).
type entry struct {
	key   Key
	mark  uint32
	until uint32
	hits  [buckets]uint8
}

// set is one associative set of the table.
type set [ways]entry

// shard is a mutex and its sets, allocated on first use so an idle
// table costs almost nothing.
type shard struct {
	mu   sync.Mutex
	sets []set
	_    [40]byte // keep neighbouring shard mutexes off one cache line
}

// Table counts authentication failures per client address in a
// fixed amount of memory (slots × 32 bytes at most) over a sliding window:
// the failure that makes MaxFailures within the window locks the address
// for LockFor from that failure. Lookups are O(1): one hash, one shard
// lock, one set scan. When a set is full the least harmful entry is
// evicted: expired first, then the fewest failures, and a locked address
// only when its whole set is locked.
type Table struct {
	policy       Policy
	bucketMs     int64
	seed         maphash.Seed
	setsPerShard int
	shards       [numShards]shard
	gates        gateStack
}

// Gate is the cluster's say in the table's answers: an address it holds
// back is answered as locked, and a local failure is shared before it is
// counted, or refused when the address is held.
type Gate interface {
	// Held reports whether k is held back.
	Held(k Key) bool
	// Share shares a local failure of k at at; false refuses it (held).
	Share(k Key, at time.Time) bool
}

// holdRetry is the Retry-After of an address a Gate holds back (its
// hold ends when the node owning its count answers: within the engine's
// timeout).
const holdRetry = time.Second

// gateStack is the table's gates, the newest in use: a reload that opens
// another cluster connection adds one before the old one goes.
type gateStack struct {
	mu      sync.Mutex
	stack   []Gate
	current atomic.Pointer[gateBox]
}

type gateBox struct{ Gate }

// AddGate makes g the gate in use (the newest gate added and not removed).
func (t *Table) AddGate(g Gate) { t.gates.push(g) }

// RemoveGate drops g; the newest remaining gate (if any) is used.
func (t *Table) RemoveGate(g Gate) { t.gates.remove(g) }

// push makes g the gate in use.
func (s *gateStack) push(g Gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stack = append(s.stack, g)
	s.current.Store(&gateBox{g})
}

// remove drops g; the newest remaining gate (if any) is used.
func (s *gateStack) remove(g Gate) {
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
func (s *gateStack) gate() Gate {
	if b := s.current.Load(); b != nil {
		return b.Gate
	}
	return nil
}

// Policy returns the table's settings (LockFor filled in).
func (t *Table) Policy() Policy { return t.policy }

// Capacity is how many addresses the table holds (lockout_table_size,
// rounded to whole sets).
func (t *Table) Capacity() int { return t.setsPerShard * numShards * ways }

// New returns an empty table for p.
func New(p Policy) *Table {
	// clamped to the bounds Validate enforces, so that a table provisioned
	// for a config that then fails validation costs nothing
	sets := max(min(max(p.Slots, 0), MaxSlots)/(numShards*ways), 1)
	if p.LockFor <= 0 {
		p.LockFor = p.Window
	}
	w := p.Window.Milliseconds()
	bucket := max((w+buckets-2)/(buckets-1), 1) // ceil(w/7)
	return &Table{policy: p, bucketMs: bucket, seed: maphash.MakeSeed(), setsPerShard: sets}
}

// bucketOf returns the number of the bucket that holds Unix millisecond ms.
func (t *Table) bucketOf(ms int64) int64 {
	return max(ms-epoch, 0) / t.bucketMs
}

// KeyOf reduces a client address to its table key: an IPv4 address, or
// an IPv6 address masked to the policy's prefix.
func (t *Table) KeyOf(ip netip.Addr) Key {
	ip = ip.Unmap()
	if ip.Is6() && t.policy.V6Bits < 128 {
		if p, err := ip.Prefix(t.policy.V6Bits); err == nil {
			ip = p.Addr()
		}
	}
	return ip.As16()
}

// locate returns the locked shard and the set for k; the caller unlocks.
func (t *Table) locate(k Key) (*shard, *set) {
	h := maphash.Bytes(t.seed, k[:])
	sh := &t.shards[h%numShards]
	sh.mu.Lock()
	if sh.sets == nil {
		sh.sets = make([]set, t.setsPerShard)
	}
	return sh, &sh.sets[(h/numShards)%uint64(t.setsPerShard)]
}

// lockEnd returns when e's lock ends, in Unix milliseconds, or 0 when e is
// not locked (the lock may be over: compare with the time).
func (t *Table) lockEnd(e *entry) int64 {
	if e.until == 0 {
		return 0
	}
	return epoch + int64(e.mark-1)*t.bucketMs + int64(e.until)
}

// expiry returns when e stops mattering, in Unix milliseconds: the end of
// its lock once locked, else when its newest bucket leaves the window.
func (t *Table) expiry(e *entry) int64 {
	if e.until != 0 {
		return t.lockEnd(e)
	}
	return epoch + (int64(e.mark-1)+buckets)*t.bucketMs
}

// failures returns the failures e counts at Unix millisecond ms (0 for a
// locked entry, whose count no longer matters).
func (t *Table) failures(e *entry, ms int64) uint32 {
	if e.until != 0 || e.mark == 0 {
		return 0
	}
	return e.count(t.bucketOf(ms))
}

// count sums the buckets of e that are inside the window in bucket cur.
func (e *entry) count(cur int64) uint32 {
	newest := int64(e.mark) - 1
	n := uint32(0)
	for i := range int64(buckets) {
		if b := newest - i; b >= 0 && cur-b < buckets {
			n += uint32(e.hits[b%buckets])
		}
	}
	return n
}

// find returns the live entry for k in s, or nil.
func (t *Table) find(s *set, k Key, now int64) *entry {
	for i := range s {
		e := &s[i]
		if e.mark != 0 && e.key == k {
			if now >= t.expiry(e) {
				*e = entry{}
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
func (t *Table) Locked(ip netip.Addr, now time.Time) (time.Duration, bool) {
	k := t.KeyOf(ip)
	if left := t.lockLeft(k, now); left > 0 {
		return left, true
	}
	if g := t.gates.gate(); g != nil && g.Held(k) {
		return holdRetry, true
	}
	return 0, false
}

// Lookup returns what the table holds for ip at now: the failures it
// counts and, when it is locked, the rest of its lock (left > 0; a locked
// address counts no failures). A cluster's hold is not looked at.
func (t *Table) Lookup(ip netip.Addr, now time.Time) (failures uint32, left time.Duration) {
	return t.lookup(t.KeyOf(ip), now)
}

// lockLeft is the rest of k's lock at now (0: not locked): Locked's
// lookup, which need not count failures.
func (t *Table) lockLeft(k Key, now time.Time) time.Duration {
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	if e := t.find(s, k, ms); e != nil && e.until != 0 {
		return time.Duration(t.lockEnd(e)-ms) * time.Millisecond
	}
	return 0
}

// lookup is Lookup of k.
func (t *Table) lookup(k Key, now time.Time) (failures uint32, left time.Duration) {
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	switch {
	case e == nil:
		return 0, 0
	case e.until == 0:
		return t.failures(e, ms), 0
	}
	return 0, time.Duration(t.lockEnd(e)-ms) * time.Millisecond
}

// Record records one authentication failure of ip at now and tells
// whether the address is locked after it: left is the rest of its lock
// (0 = not locked) and newly says that this failure locked it. A failure
// of a locked address is not counted (the lock is not extended). now may
// be older than the address's newest failure (a failure reported late):
// it is counted in its bucket while that is still inside the window. A failure that finds the address already
// locked (a concurrent request lost the race to the one that locked it)
// gets left > 0 and newly false; so does one the cluster refuses to share
// because the address is held back (left = holdRetry): it is not counted.
func (t *Table) Record(ip netip.Addr, now time.Time) (left time.Duration, newly bool) {
	return t.record(t.KeyOf(ip), now, t.gates.gate())
}

// record counts a failure of k at now, shared through g first (nil: a
// failure another node shared, or no cluster).
func (t *Table) record(k Key, now time.Time, g Gate) (left time.Duration, newly bool) {
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	if e != nil && e.until != 0 {
		return time.Duration(t.lockEnd(e)-ms) * time.Millisecond, false
	}
	if g != nil && !g.Share(k, now) {
		return holdRetry, false // held: not counted, no slot taken
	}
	if e == nil {
		e = t.victim(s, ms)
		*e = entry{key: k}
	}
	b := t.bucketOf(ms)
	if newest := int64(e.mark) - 1; b > newest {
		// slide: empty the buckets between the newest one and b
		for n := max(newest+1, b-buckets+1); n <= b; n++ {
			e.hits[n%buckets] = 0
		}
		e.mark = uint32(b + 1)
	} else if newest-b >= buckets {
		return 0, false // older than the window
	}
	if e.hits[b%buckets] < MaxCount {
		e.hits[b%buckets]++
	}
	if e.count(int64(e.mark)-1) < t.policy.MaxFailures {
		return 0, false
	}
	start := epoch + int64(e.mark-1)*t.bucketMs
	e.until = lockSpan(ms+t.policy.LockFor.Milliseconds(), start)
	e.hits = [buckets]uint8{}
	return time.Duration(t.lockEnd(e)-ms) * time.Millisecond, true
}

// FoldFailure counts a failure of k that another node saw at at, as if
// this node had seen it (not shared again); it returns the end of k's lock
// (zero: not locked) and whether this failure locked it.
func (t *Table) FoldFailure(k Key, at time.Time) (until time.Time, newly bool) {
	left, newly := t.record(k, at, nil)
	if left <= 0 {
		return time.Time{}, false
	}
	return at.Add(left), newly
}

// lockSpan is the until of a lock ending at Unix millisecond end, counted
// from start: at least 1 (locked) and at most what a uint32 holds (about
// 49 days, far beyond the longest lock a config allows), never wrapped.
func lockSpan(end, start int64) uint32 {
	return uint32(min(max(end-start, 1), math.MaxUint32))
}

// Reset forgets ip (after a successful authentication, or to lift a lock).
func (t *Table) Reset(ip netip.Addr) {
	k := t.KeyOf(ip)
	sh, s := t.locate(k)
	for i := range s {
		if s[i].key == k {
			s[i] = entry{}
		}
	}
	sh.mu.Unlock()
}

// victim picks the slot a new key takes in s.
func (t *Table) victim(s *set, now int64) *entry {
	var best *entry
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
func (t *Table) evictBefore(a, b *entry, now int64) bool {
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
func (t *Table) each(f func(e *entry)) {
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
func (t *Table) Active(now time.Time) int {
	ms := now.UnixMilli()
	n := 0
	t.each(func(e *entry) {
		if e.mark != 0 && e.until != 0 && ms < t.lockEnd(e) {
			n++
		}
	})
	return n
}

// Destruct satisfies caddy.Destructor for the usage pool.
func (t *Table) Destruct() error { return nil }

// Lock is one locked-out client for the admin API: an address, or an
// IPv6 prefix when the table groups IPv6 clients.
type Lock struct {
	Addr  string    // the address, or the IPv6 prefix
	Until time.Time // the end of the lock
}

// Locks lists at most limit addresses locked at now, in no particular order.
func (t *Table) Locks(now time.Time, limit int) []Lock {
	ms := now.UnixMilli()
	var out []Lock
	t.each(func(e *entry) {
		if end := t.lockEnd(e); len(out) < limit && e.mark != 0 && end != 0 && ms < end {
			out = append(out, Lock{Addr: t.keyString(e.key), Until: time.UnixMilli(end)})
		}
	})
	return out
}

// Lift ends ip's lockout and forgets its failures, as a successful
// authentication would; it reports false when ip was not locked.
func (t *Table) Lift(ip netip.Addr, now time.Time) bool {
	if _, left := t.Lookup(ip, now); left <= 0 {
		return false
	}
	t.Reset(ip)
	return true
}

// keyString formats a table key: the IPv4 or IPv6 address, or the IPv6
// prefix when IPv6 clients are grouped.
func (t *Table) keyString(k Key) string {
	ip := netip.AddrFrom16(k).Unmap()
	if ip.Is6() && t.policy.V6Bits < 128 {
		return netip.PrefixFrom(ip, t.policy.V6Bits).String()
	}
	return ip.String()
}
