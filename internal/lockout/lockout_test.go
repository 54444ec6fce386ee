package lockout

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// lockT0 is the fixed start of every simulated lockout timeline.
var lockT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testLockoutPolicy is the reference lockout: 20 failures per minute,
// IPv6 grouped by /64, the smallest table (one set per shard).
func testLockoutPolicy() Policy {
	return Policy{MaxFailures: 20, Window: time.Minute, V6Bits: 64, Slots: numShards * ways}
}

// fail records one failure of ip at now and reports whether it locked
// the address.
func fail(tbl *Table, ip netip.Addr, now time.Time) bool {
	_, newly := tbl.Record(ip, now)
	return newly
}

// failN records n failures for ip, one every step from at; it returns
// the index (1-based) of the failure that reported the lock, or 0.
func failN(tbl *Table, ip netip.Addr, n int, at time.Time, step time.Duration) int {
	locked := 0
	for i := 1; i <= n; i++ {
		if fail(tbl, ip, at.Add(time.Duration(i-1)*step)) && locked == 0 {
			locked = i
		}
	}
	return locked
}

func TestLockoutThreshold(t *testing.T) {
	tbl := New(testLockoutPolicy())
	ip := netip.MustParseAddr("198.51.100.7")
	for i := 1; i <= 19; i++ {
		if fail(tbl, ip, lockT0.Add(time.Duration(i-1)*100*time.Millisecond)) {
			t.Fatalf("failure %d locked", i)
		}
		if _, locked := tbl.Locked(ip, lockT0.Add(2*time.Second)); locked {
			t.Fatalf("locked after %d failures", i)
		}
	}
	if !fail(tbl, ip, lockT0.Add(1900*time.Millisecond)) {
		t.Fatal("the 20th failure did not lock")
	}
	// as the reference gateway: locked for 60s from the 20th failure (at
	// +1.9s), the rest of the lock counting down from 60s
	for _, tc := range []struct {
		at     time.Duration // after lockT0 (the first failure)
		locked bool
		left   time.Duration
	}{
		{at: 1900 * time.Millisecond, locked: true, left: time.Minute},
		{at: 2 * time.Second, locked: true, left: 59900 * time.Millisecond},
		{at: 10*time.Second + 300*time.Millisecond, locked: true, left: 51600 * time.Millisecond},
		{at: 61*time.Second + 899*time.Millisecond, locked: true, left: time.Millisecond},
		{at: 61*time.Second + 900*time.Millisecond, locked: false},
		{at: 2 * time.Minute, locked: false},
	} {
		left, locked := tbl.Locked(ip, lockT0.Add(tc.at))
		if locked != tc.locked || left != tc.left {
			t.Errorf("at +%v: Locked = %v, %v; want %v, %v", tc.at, left, locked, tc.left, tc.locked)
		}
	}
	other := netip.MustParseAddr("198.51.100.8")
	if _, locked := tbl.Locked(other, lockT0.Add(2*time.Second)); locked {
		t.Error("a neighbouring address is locked too")
	}
}

// windowMax is how long a failure may count at most: the window slides in
// steps of window/7, so a failure counts for at least the window and less
// than window×8/7.
const windowMax = time.Minute * buckets / (buckets - 1)

func TestLockoutWindow(t *testing.T) {
	ip := netip.MustParseAddr("203.0.113.9")
	for _, tc := range []struct {
		name   string
		run    func(tbl *Table) // failures and resets
		check  time.Duration    // when to ask Locked, after lockT0
		locked bool
	}{
		{name: "sliding: 19 then one 59.9s after the first", check: 60 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0, 0)
			failN(tbl, ip, 1, lockT0.Add(59900*time.Millisecond), 0)
		}},
		{name: "no fixed-window escape: 18 just before and 19 just after a window from the first failure", check: 61 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 1, lockT0, 0)
			failN(tbl, ip, 18, lockT0.Add(59900*time.Millisecond), 0)
			failN(tbl, ip, 19, lockT0.Add(60100*time.Millisecond), 0)
		}},
		{name: "19 then one after the window has slid past them", check: windowMax + time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0, 0)
			failN(tbl, ip, 1, lockT0.Add(windowMax), 0)
		}},
		{name: "19 then 19 after the window", check: 2*windowMax + time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0, time.Second)
			failN(tbl, ip, 19, lockT0.Add(windowMax+19*time.Second), 0)
		}},
		{name: "20 spread over the window", check: 116 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 3*time.Second) // last at +57s: locked until +117s
		}},
		{name: "the lock ends 60s after the locking failure", check: 117 * time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 3*time.Second)
		}},
		{name: "success resets", check: 20 * time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0, 0)
			tbl.Reset(ip)
			failN(tbl, ip, 19, lockT0.Add(time.Second), 0)
		}},
		{name: "reset unlocks", check: 20 * time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 25, lockT0, 0)
			tbl.Reset(ip)
		}},
		{name: "reset of another address keeps the lock", check: 20 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 0)
			tbl.Reset(netip.MustParseAddr("203.0.113.10"))
		}},
		{name: "failures while locked do not extend", check: 60 * time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 0)
			failN(tbl, ip, 30, lockT0.Add(30*time.Second), time.Second)
		}},
		{name: "the count starts again after a lock", check: 61 * time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 0)
			failN(tbl, ip, 19, lockT0.Add(60*time.Second), 0)
		}},
		{name: "and the 20th after the lock locks again", check: 61 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 20, lockT0, 0)
			failN(tbl, ip, 20, lockT0.Add(60*time.Second), 0)
		}},
		{name: "a late failure counts in its bucket", check: 31 * time.Second, locked: true, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0.Add(30*time.Second), 0)
			failN(tbl, ip, 1, lockT0.Add(5*time.Second), 0)
		}},
		{name: "a failure reported after the window is ignored", check: windowMax + 2*time.Second, run: func(tbl *Table) {
			failN(tbl, ip, 19, lockT0.Add(windowMax+time.Second), 0)
			failN(tbl, ip, 1, lockT0, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := New(testLockoutPolicy())
			tc.run(tbl)
			if _, locked := tbl.Locked(ip, lockT0.Add(tc.check)); locked != tc.locked {
				t.Fatalf("locked = %v, want %v", locked, tc.locked)
			}
		})
	}
}

// TestLockoutSlidingBounds checks, for every offset of the first failure
// within a bucket, that a failure counts for at least the window and
// stops counting before window×8/7: 19 failures, then one more.
func TestLockoutSlidingBounds(t *testing.T) {
	ip := netip.MustParseAddr("203.0.113.77")
	p := testLockoutPolicy()
	step := time.Minute / (buckets - 1) / 10
	for off := time.Duration(0); off < time.Minute/(buckets-1)+step; off += step {
		first := lockT0.Add(off)
		inside := New(p)
		failN(inside, ip, 19, first, 0)
		if !fail(inside, ip, first.Add(time.Minute-time.Millisecond)) {
			t.Errorf("offset %v: a failure inside the window did not lock", off)
		}
		outside := New(p)
		failN(outside, ip, 19, first, 0)
		if fail(outside, ip, first.Add(windowMax)) {
			t.Errorf("offset %v: failures older than window×8/7 still counted", off)
		}
	}
}

func TestLockoutEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 32 {
		t.Fatalf("entry is %d bytes, want 32 (lockout_table_size × 32 bytes ≤ 64 MiB)", n)
	}
}

// TestLockoutDuration covers the `lockout` option: a lock that lasts a
// fixed time from the locking failure, longer or shorter than the window.
func TestLockoutDuration(t *testing.T) {
	ip := netip.MustParseAddr("192.0.2.44")
	lastFail := 1900 * time.Millisecond // 20 failures, 100ms apart
	for _, tc := range []struct {
		name    string
		lockFor time.Duration
		checks  []struct {
			at     time.Duration
			locked bool
			left   time.Duration
		}
	}{
		{name: "longer than the window", lockFor: 5 * time.Minute, checks: []struct {
			at     time.Duration
			locked bool
			left   time.Duration
		}{
			{at: 2 * time.Second, locked: true, left: 5*time.Minute - 100*time.Millisecond},
			{at: 61 * time.Second, locked: true, left: 5*time.Minute + lastFail - 61*time.Second},
			{at: 5*time.Minute + lastFail - time.Millisecond, locked: true, left: time.Millisecond},
			{at: 5*time.Minute + lastFail, locked: false},
		}},
		{name: "shorter than the window", lockFor: 10 * time.Second, checks: []struct {
			at     time.Duration
			locked bool
			left   time.Duration
		}{
			{at: 2 * time.Second, locked: true, left: 10*time.Second - 100*time.Millisecond},
			{at: 10*time.Second + lastFail - time.Millisecond, locked: true, left: time.Millisecond},
			{at: 10*time.Second + lastFail, locked: false},
			{at: 30 * time.Second, locked: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testLockoutPolicy()
			p.LockFor = tc.lockFor
			tbl := New(p)
			if n := failN(tbl, ip, 20, lockT0, 100*time.Millisecond); n != 20 {
				t.Fatalf("locked at failure %d, want 20", n)
			}
			for _, c := range tc.checks {
				left, locked := tbl.Locked(ip, lockT0.Add(c.at))
				if locked != c.locked || left != c.left {
					t.Errorf("at +%v: Locked = %v, %v; want %v, %v", c.at, left, locked, c.left, c.locked)
				}
			}
		})
	}
}

// TestLockoutShortLockRelocks: once a short lock is over, the address
// gets a fresh count, and 20 more failures lock it again.
func TestLockoutShortLockRelocks(t *testing.T) {
	p := testLockoutPolicy()
	p.LockFor = 10 * time.Second
	tbl := New(p)
	ip := netip.MustParseAddr("192.0.2.45")
	failN(tbl, ip, 20, lockT0, 0)
	after := lockT0.Add(15 * time.Second)
	if n := failN(tbl, ip, 20, after, 0); n != 20 {
		t.Fatalf("second round locked at failure %d, want 20", n)
	}
	if left, locked := tbl.Locked(ip, after.Add(time.Second)); !locked || left != 9*time.Second {
		t.Fatalf("Locked = %v, %v; want 9s, true", left, locked)
	}
}

func TestLockoutAddressGrouping(t *testing.T) {
	for _, tc := range []struct {
		a, b   string
		v6Bits int
		shared bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", 64, true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", 64, false},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", 48, true},
		{"2001:db8:1:2::1", "2001:db8:2:2::1", 48, false},
		{"2001:db8::1", "2001:db8::2", 128, false},
		{"2001:db8::1", "2001:db8::1", 128, true},
		{"fe80::1%eth0", "fe80::2%eth1", 64, true},
		{"192.0.2.1", "::ffff:192.0.2.1", 64, true},
		{"::ffff:192.0.2.1", "192.0.2.1", 128, true},
		{"192.0.2.1", "192.0.2.2", 64, false},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.2", 64, false},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.2", 16, false},
		{"192.0.2.1", "::c000:201", 64, false},
	} {
		t.Run(fmt.Sprintf("%s~%s/%d", tc.a, tc.b, tc.v6Bits), func(t *testing.T) {
			p := testLockoutPolicy()
			p.V6Bits = tc.v6Bits
			tbl := New(p)
			a, b := netip.MustParseAddr(tc.a), netip.MustParseAddr(tc.b)
			failN(tbl, a, 20, lockT0, 0)
			if _, locked := tbl.Locked(a, lockT0.Add(time.Second)); !locked {
				t.Fatal("a is not locked")
			}
			if _, locked := tbl.Locked(b, lockT0.Add(time.Second)); locked != tc.shared {
				t.Fatalf("b locked = %v, want %v", locked, tc.shared)
			}
		})
	}
}

// sameSet returns n IPv4 addresses whose keys fall into the same set of
// tbl as the first one.
func sameSet(t *testing.T, tbl *Table, n int) []netip.Addr {
	t.Helper()
	where := func(ip netip.Addr) [2]uint64 {
		k := tbl.KeyOf(ip)
		h := maphash.Bytes(tbl.seed, k[:])
		return [2]uint64{h % numShards, (h / numShards) % uint64(tbl.setsPerShard)}
	}
	var out []netip.Addr
	var target [2]uint64
	for i := uint32(1); len(out) < n; i++ {
		if i > 1<<24 {
			t.Fatal("could not find colliding addresses")
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], 10<<24|i)
		ip := netip.AddrFrom4(b)
		if len(out) == 0 {
			target = where(ip)
		}
		if where(ip) == target {
			out = append(out, ip)
		}
	}
	return out
}

// failures returns ip's live failure count and lock state at now.
func failures(tbl *Table, ip netip.Addr, now time.Time) (uint32, bool) {
	n, left := tbl.Lookup(ip, now)
	return n, left > 0
}

func TestLockoutEviction(t *testing.T) {
	at := lockT0.Add(time.Second)
	t.Run("locked survives a spread attack on its set", func(t *testing.T) {
		tbl := New(testLockoutPolicy())
		ips := sameSet(t, tbl, 200)
		failN(tbl, ips[0], 20, lockT0, 0)
		for _, ip := range ips[1:] {
			failN(tbl, ip, 3, lockT0, 0)
		}
		if _, locked := tbl.Locked(ips[0], at); !locked {
			t.Fatal("the locked address was evicted by unlocked ones")
		}
	})
	t.Run("fewest failures evicted first", func(t *testing.T) {
		tbl := New(testLockoutPolicy())
		ips := sameSet(t, tbl, ways+1)
		counts := []int{5, 7, 1, 9, 4, 6, 8, 3} // ips[2] has the fewest
		for i, n := range counts {
			failN(tbl, ips[i], n, lockT0, 0)
		}
		failN(tbl, ips[ways], 2, lockT0, 0)
		for i, n := range counts {
			got, _ := failures(tbl, ips[i], at)
			want := uint32(n)
			if i == 2 {
				want = 0
			}
			if got != want {
				t.Errorf("address %d: %d failures tracked, want %d", i, got, want)
			}
		}
		if got, _ := failures(tbl, ips[ways], at); got != 2 {
			t.Errorf("newcomer has %d failures, want 2", got)
		}
	})
	t.Run("expired entries evicted before live ones", func(t *testing.T) {
		tbl := New(testLockoutPolicy())
		ips := sameSet(t, tbl, ways+1)
		failN(tbl, ips[0], 20, lockT0.Add(-2*time.Minute), 0) // old, expired lock
		for _, ip := range ips[1:ways] {
			failN(tbl, ip, 1, lockT0, 0)
		}
		failN(tbl, ips[ways], 1, lockT0, 0)
		for i, ip := range ips[1:] {
			if got, _ := failures(tbl, ip, at); got != 1 {
				t.Errorf("live address %d lost its count (%d)", i+1, got)
			}
		}
	})
	t.Run("a full set of locks evicts the oldest lock", func(t *testing.T) {
		tbl := New(testLockoutPolicy())
		ips := sameSet(t, tbl, ways+1)
		for i, ip := range ips[:ways] {
			failN(tbl, ip, 20, lockT0.Add(time.Duration(i)*time.Millisecond), 0)
		}
		failN(tbl, ips[ways], 1, lockT0.Add(10*time.Millisecond), 0)
		if _, locked := tbl.Locked(ips[0], at); locked {
			t.Error("the oldest lock survived")
		}
		for i, ip := range ips[1:ways] {
			if _, locked := tbl.Locked(ip, at); !locked {
				t.Errorf("lock %d was evicted", i+1)
			}
		}
		if got, _ := failures(tbl, ips[ways], at); got != 1 {
			t.Errorf("newcomer has %d failures, want 1", got)
		}
	})
}

func TestLockoutActive(t *testing.T) {
	tbl := New(testLockoutPolicy())
	for i := range 5 {
		failN(tbl, netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 20, lockT0, 0)
	}
	failN(tbl, netip.MustParseAddr("192.0.2.100"), 19, lockT0, 0)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{{time.Second, 5}, {59 * time.Second, 5}, {60 * time.Second, 0}} {
		if got := tbl.Active(lockT0.Add(tc.at)); got != tc.want {
			t.Errorf("Active(+%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

// TestLockoutConcurrent exercises the shard locks (run with -race).
func TestLockoutConcurrent(t *testing.T) {
	tbl := New(testLockoutPolicy())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ip := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)})
				fail(tbl, ip, lockT0)
				tbl.Locked(ip, lockT0)
				if i%7 == 0 {
					tbl.Reset(ip)
				}
			}
		}()
	}
	wg.Wait()
	if n := tbl.Active(lockT0); n != 0 {
		t.Fatalf("%d addresses locked after single failures", n)
	}
}

// millionAddr returns the i-th address of the scale tests: even i are
// distinct IPv4 addresses, odd i IPv6 addresses in distinct /64s.
func millionAddr(i int) netip.Addr {
	if i%2 == 0 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], 1<<24+uint32(i/2))
		return netip.AddrFrom4(b)
	}
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8}
	binary.BigEndian.PutUint32(b[4:8], uint32(i/2))
	b[15] = 1
	return netip.AddrFrom16(b)
}

// TestLockoutMillionAddresses records failures from a million distinct
// clients (half IPv4, half IPv6 in distinct /64s) in a default-size
// table: memory stays bounded, locked addresses stay locked.
func TestLockoutMillionAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	const n = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	p := testLockoutPolicy()
	p.Slots = DefaultSlots
	tbl := New(p)
	lockedIPs := make([]netip.Addr, 1000)
	for i := range lockedIPs {
		lockedIPs[i] = netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})
		failN(tbl, lockedIPs[i], 20, lockT0, 0)
	}
	start := time.Now()
	for i := range n {
		fail(tbl, millionAddr(i), lockT0.Add(time.Duration(i)*time.Microsecond))
	}
	elapsed := time.Since(start)

	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	tableBytes := 0
	for i := range tbl.shards {
		tableBytes += len(tbl.shards[i].sets) * int(unsafe.Sizeof(set{}))
	}
	t.Logf("%d failures in %v (%v/op); heap growth %.1f MiB; table %.1f MiB",
		n, elapsed, elapsed/n, float64(growth)/(1<<20), float64(tableBytes)/(1<<20))
	if growth > 150<<20 {
		t.Errorf("heap grew by %.1f MiB, want < 150 MiB", float64(growth)/(1<<20))
	}
	if tableBytes > 64<<20 {
		t.Errorf("table holds %.1f MiB, want ≤ 64 MiB", float64(tableBytes)/(1<<20))
	}

	check := lockT0.Add(2 * time.Second)
	for _, ip := range lockedIPs {
		if _, locked := tbl.Locked(ip, check); !locked {
			t.Fatalf("%v lost its lock to the spread", ip)
		}
	}
	tracked := 0
	for i := range n {
		if c, _ := failures(tbl, millionAddr(i), check); c == 1 {
			tracked++
		}
	}
	t.Logf("%d of %d addresses still tracked", tracked, n)
	if tracked < n*99/100 {
		t.Errorf("only %d of %d addresses tracked in a table of %d slots", tracked, n, p.Slots)
	}
	runtime.KeepAlive(tbl)
}

// BenchmarkLockoutLookup compares lookups in a table tracking 1k and 1M
// addresses. Every lookup scans one set of at most ways entries;
// "hot" looks up only 1k of the 1M addresses, which separates the cost of
// the table's population (none) from that of cache misses over a 64 MiB
// working set.
func BenchmarkLockoutLookup(b *testing.B) {
	for _, tc := range []struct {
		name     string
		entries  int
		lookedUp int
	}{
		{"entries=1k", 1_000, 1_000},
		{"entries=1M", 1_000_000, 1_000_000},
		{"entries=1M/hot=1k", 1_000_000, 1_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := testLockoutPolicy()
			p.Slots = DefaultSlots
			tbl := New(p)
			for i := range tc.entries {
				fail(tbl, millionAddr(i), lockT0)
			}
			now := lockT0.Add(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				tbl.Locked(millionAddr(i), now)
				if i++; i == tc.lookedUp {
					i = 0
				}
			}
		})
	}
}

// TestLockoutLockEndNeverWraps (issue 20 item 3): a lock end further
// away than a uint32 of milliseconds holds (about 49.7 days) is stored
// as the longest lock the table can hold, never wrapped round to a short
// or arbitrary one. Before the fix a lock 60 days ahead came out as
// about 10 days (60 − 49.7), one of 49.71 days as a few seconds.
func TestLockoutLockEndNeverWraps(t *testing.T) {
	tbl := New(testLockoutPolicy())
	now := time.Now()
	maxSpan := time.Duration(math.MaxUint32) * time.Millisecond
	for i, ahead := range []time.Duration{time.Hour, 40 * 24 * time.Hour, maxSpan - time.Minute, maxSpan + 5*time.Second, 60 * 24 * time.Hour} {
		ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)})
		tbl.ApplyLock(tbl.KeyOf(ip), now.Add(ahead))
		left, locked := tbl.Locked(ip, now)
		// the lock counts from the start of the current bucket: up to one
		// bucket (window/7) less than asked
		want := min(ahead, maxSpan-time.Duration(tbl.bucketMs)*time.Millisecond)
		if !locked || left < want-time.Duration(tbl.bucketMs)*time.Millisecond || left > ahead {
			t.Errorf("lock %v ahead: locked %v for %v, want about %v", ahead, locked, left, want)
		}
	}
}
