package lockout

import (
	"net/netip"
	"testing"
	"time"
)

// TestLockoutAdopt: a table for changed settings takes over the locked
// addresses of the old one until the moment the old lock ends, and the
// failure counts of the others; expired entries are not copied; the old
// table is left as it was.
func TestLockoutAdopt(t *testing.T) {
	old := New(testLockoutPolicy())
	locked := netip.MustParseAddr("198.51.100.7")
	counting := netip.MustParseAddr("198.51.100.8")
	expired := netip.MustParseAddr("198.51.100.9")
	v6 := netip.MustParseAddr("2001:db8:1:2:3:4:5:6")
	failN(old, expired, 3, lockT0.Add(-2*time.Minute), time.Second) // its window is over by lockT0
	if failN(old, locked, 20, lockT0, 100*time.Millisecond) != 20 {
		t.Fatal("setup: not locked")
	}
	if failN(old, v6, 20, lockT0, 100*time.Millisecond) != 20 {
		t.Fatal("setup: v6 not locked")
	}
	failN(old, counting, 5, lockT0, time.Second)

	p := testLockoutPolicy()
	p.MaxFailures, p.Window, p.LockFor, p.V6Bits = 8, 5*time.Minute, 10*time.Minute, 48
	tbl := New(p)
	now := lockT0.Add(10 * time.Second)
	tbl.Adopt(old, now)

	oldLeft, _ := old.Locked(locked, now)
	for _, ip := range []netip.Addr{locked, v6, netip.MustParseAddr("2001:db8:1:ffff::1")} { // same /48
		left, ok := tbl.Locked(ip, now)
		if !ok || left != oldLeft {
			t.Errorf("%v after adopt: locked=%v for %v; want locked for %v as before", ip, ok, left, oldLeft)
		}
	}
	if _, ok := tbl.Locked(locked, now.Add(oldLeft-time.Millisecond)); !ok {
		t.Error("the adopted lock ends before the old one")
	}
	if _, ok := tbl.Locked(locked, now.Add(oldLeft)); ok {
		t.Error("the adopted lock outlives the old one")
	}
	if c, _ := failures(tbl, counting, now); c != 5 {
		t.Errorf("count of %v after adopt = %d, want 5", counting, c)
	}
	if failN(tbl, counting, 3, now, time.Second) != 3 {
		t.Errorf("%v not locked at its 8th failure under the new threshold", counting)
	}
	if c, _ := failures(tbl, expired, now); c != 0 {
		t.Errorf("an expired entry was copied: count %d", c)
	}
	if left, ok := old.Locked(locked, now); !ok || left != oldLeft {
		t.Error("adopt changed the old table")
	}
}
