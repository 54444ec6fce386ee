package lockout

import (
	"net/netip"
	"testing"
	"time"
)

// TestLockoutTableAsLockTarget: the other nodes' failures count in the
// table like local ones (the limit-th locks), and a lock from the locks
// bucket applies until its own end, unless the address is locked longer.
func TestLockoutTableAsLockTarget(t *testing.T) {
	tbl := New(Policy{MaxFailures: 3, Window: time.Minute, V6Bits: 64, Slots: 1 << 12})
	now := time.Now()
	ip := netip.MustParseAddr("198.51.100.7")
	a := (tbl.KeyOf(ip))
	fail(tbl, ip, now)
	tbl.FoldFailure(a, now)
	if _, locked := tbl.Locked(ip, now); locked {
		t.Fatal("locked after 2 of 3 failures")
	}
	tbl.FoldFailure(a, now)
	if _, locked := tbl.Locked(ip, now); !locked {
		t.Fatal("not locked after the third failure, seen by another node")
	}

	v6 := netip.MustParseAddr("2001:db8::1")
	b := (tbl.KeyOf(netip.MustParseAddr("2001:db8::2"))) // same /64
	until := now.Add(90 * time.Second)
	if !tbl.ApplyLock(b, until) {
		t.Fatal("ApplyLock on an unlocked address changed nothing")
	}
	left, locked := tbl.Locked(v6, now)
	if !locked || left < 89*time.Second || left > 91*time.Second {
		t.Fatalf("after ApplyLock for 90s: locked %v for %v", locked, left)
	}
	if tbl.ApplyLock(b, now.Add(time.Second)) {
		t.Fatal("a shorter lock replaced a longer one")
	}
	if !tbl.ApplyLock(b, now.Add(2*time.Minute)) {
		t.Fatal("a longer lock did not extend")
	}
}
