package caddyhook

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// lockoutWays is the associativity of the lockout table: a key lives in one
// set of this many slots, so every lookup touches at most lockoutWays
// entries whatever the number of addresses.
const lockoutWays = 8

// lockoutShards splits the table into independently locked parts.
const lockoutShards = 256

// maxLockoutSlots bounds lockout_table_size (2 GiB of 32-byte entries).
const maxLockoutSlots = 1 << 26

// lockoutPolicy holds the lockout settings; the table is keyed by them so a
// reload with the same settings keeps its state.
type lockoutPolicy struct {
	maxFailures uint32
	window      time.Duration
	lockFor     time.Duration // 0: locked for the rest of the window
	v6Bits      int
	slots       int
}

// addrKey is a client address reduced to its lockout identity: an IPv4
// address, or an IPv6 address masked to the configured prefix.
type addrKey [16]byte

// lockEntry is one tracked address. start is the window start in Unix
// milliseconds (0 = empty slot); lockMs, when non-zero, is how long after
// start the address stays locked.
type lockEntry struct {
	key    addrKey
	start  int64
	count  uint32
	lockMs uint32
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
// fixed amount of memory (slots × 32 bytes at most). Lookups are O(1): one
// hash, one shard lock, one set scan. When a set is full the least harmful
// entry is evicted: expired first, then the fewest failures, and a locked
// address only when its whole set is locked.
type lockoutTable struct {
	policy       lockoutPolicy
	seed         maphash.Seed
	setsPerShard int
	shards       [lockoutShards]lockShard
}

// newLockoutTable returns an empty table for p.
func newLockoutTable(p lockoutPolicy) *lockoutTable {
	// clamped to the bounds Validate enforces, so that a table provisioned
	// for a config that then fails validation costs nothing
	sets := min(max(p.slots, 0), maxLockoutSlots) / (lockoutShards * lockoutWays)
	if sets < 1 {
		sets = 1
	}
	return &lockoutTable{policy: p, seed: maphash.MakeSeed(), setsPerShard: sets}
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

// expiry returns when e stops mattering, in Unix milliseconds: the end of
// its lock once locked (a lock shorter than the window ends the window
// too, so the address then starts a fresh count), else the end of its
// failure window.
func (t *lockoutTable) expiry(e *lockEntry) int64 {
	if e.lockMs != 0 {
		return e.start + int64(e.lockMs)
	}
	return e.start + t.policy.window.Milliseconds()
}

// find returns the live entry for k in s, or nil.
func (t *lockoutTable) find(s *lockSet, k addrKey, now int64) *lockEntry {
	for i := range s {
		e := &s[i]
		if e.start != 0 && e.key == k {
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
// longer.
func (t *lockoutTable) Locked(ip netip.Addr, now time.Time) (time.Duration, bool) {
	k := t.keyFor(ip)
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	if e == nil || e.lockMs == 0 {
		return 0, false
	}
	return time.Duration(e.start+int64(e.lockMs)-ms) * time.Millisecond, true
}

// Fail records one authentication failure for ip. It returns true when this
// failure locked the address.
func (t *lockoutTable) Fail(ip netip.Addr, now time.Time) bool {
	k := t.keyFor(ip)
	ms := now.UnixMilli()
	sh, s := t.locate(k)
	defer sh.mu.Unlock()
	e := t.find(s, k, ms)
	if e == nil {
		e = t.victim(s, ms)
		*e = lockEntry{key: k, start: ms}
	}
	e.count++
	if e.count >= t.policy.maxFailures && e.lockMs == 0 {
		lock := t.policy.window.Milliseconds()
		if t.policy.lockFor > 0 {
			lock = ms - e.start + t.policy.lockFor.Milliseconds()
		}
		e.lockMs = uint32(max(lock, 1))
		return true
	}
	return false
}

// Reset forgets ip after a successful authentication.
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
		if e.start == 0 || now >= t.expiry(e) {
			return e
		}
		if best == nil || evictBefore(e, best) {
			best = e
		}
	}
	return best
}

// evictBefore orders live entries for eviction: unlocked before locked,
// then fewer failures, then older windows.
func evictBefore(a, b *lockEntry) bool {
	if (a.lockMs == 0) != (b.lockMs == 0) {
		return a.lockMs == 0
	}
	if a.count != b.count {
		return a.count < b.count
	}
	return a.start < b.start
}

// Active counts the addresses locked at now (for the metrics gauge).
func (t *lockoutTable) Active(now time.Time) int {
	ms := now.UnixMilli()
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.sets {
			for _, e := range sh.sets[j] {
				if e.start != 0 && e.lockMs != 0 && ms < e.start+int64(e.lockMs) {
					n++
				}
			}
		}
		sh.mu.Unlock()
	}
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
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for j := range sh.sets {
			for k := range sh.sets[j] {
				e := &sh.sets[j][k]
				if len(out) < limit && e.start != 0 && e.lockMs != 0 && ms < t.expiry(e) {
					out = append(out, lockedAddr{addr: t.keyString(e.key), until: time.UnixMilli(t.expiry(e))})
				}
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// Lift ends ip's lockout and forgets its failures, as a successful
// authentication would; it reports false when ip was not locked.
func (t *lockoutTable) Lift(ip netip.Addr, now time.Time) bool {
	if _, locked := t.Locked(ip, now); !locked {
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
