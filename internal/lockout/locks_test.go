package lockout

import (
	"net/netip"
	"testing"
	"time"
)

// TestLockoutLocksAndLift lists locked addresses (IPv6 by prefix) with
// their release time and lifts them.
func TestLockoutLocksAndLift(t *testing.T) {
	tbl := New(Policy{MaxFailures: 2, Window: time.Minute, V6Bits: 64, Slots: MinSlots})
	now := time.Unix(1_800_000_000, 0)
	v4 := netip.MustParseAddr("203.0.113.7")
	v6 := netip.MustParseAddr("2001:db8:1:2::5")
	once := netip.MustParseAddr("198.51.100.1")
	for _, ip := range []netip.Addr{v4, v4, v6, v6, once} {
		fail(tbl, ip, now)
	}
	got := map[string]time.Time{}
	for _, l := range tbl.Locks(now, 10) {
		got[l.Addr] = l.Until
	}
	want := map[string]time.Time{"203.0.113.7": now.Add(time.Minute), "2001:db8:1:2::/64": now.Add(time.Minute)}
	if len(got) != len(want) || !got["203.0.113.7"].Equal(want["203.0.113.7"]) || !got["2001:db8:1:2::/64"].Equal(want["2001:db8:1:2::/64"]) {
		t.Fatalf("Locks = %v, want %v", got, want)
	}
	if n := len(tbl.Locks(now, 1)); n != 1 {
		t.Fatalf("Locks with limit 1: %d entries", n)
	}
	if tbl.Lift(once, now) {
		t.Fatal("lifted an address that was not locked")
	}
	// any address of the prefix lifts it
	if !tbl.Lift(netip.MustParseAddr("2001:db8:1:2::99"), now) || !tbl.Lift(v4, now) {
		t.Fatal("Lift of a locked address reported false")
	}
	if _, locked := tbl.Locked(v6, now); locked {
		t.Fatal("still locked after Lift")
	}
	if fail(tbl, v4, now) {
		t.Fatal("a lifted address locked again on its next failure: its failures were not forgotten")
	}
	if n := len(tbl.Locks(now, 10)); n != 0 {
		t.Fatalf("%d locks after lifting", n)
	}
}
