package main

import (
	"net/netip"
	"testing"
)

func TestSpreadAddrsAreDistinctLoopback(t *testing.T) {
	var s spreadAddrs
	seen := map[netip.Addr]bool{}
	first := s.take()
	if want := netip.MustParseAddr("127.1.0.1"); first != want {
		t.Fatalf("first address %v, want %v", first, want)
	}
	seen[first] = true
	for range 70_000 { // crosses several /24 boundaries
		a := s.take()
		b := a.As4()
		if seen[a] || !a.IsLoopback() || b[3] == 0 || b[3] == 255 || a == lockedAddr || b[1] == 0 {
			t.Fatalf("bad or repeated address %v", a)
		}
		seen[a] = true
	}
}

func TestPutForwarded(t *testing.T) {
	seen := map[string]bool{}
	buf := make([]byte, forwardedWidth)
	for _, n := range []uint64{0, 1, 99, 100, 9_999, 10_000, forwardedAddrs - 1} {
		putForwarded(buf, n)
		a, err := netip.ParseAddr(string(buf))
		if err != nil || !a.Is4() || a.As4()[0] != 10 {
			t.Fatalf("n=%d: %q is not a 10/8 address (%v)", n, buf, err)
		}
		if seen[string(buf)] {
			t.Fatalf("n=%d: %q repeated", n, buf)
		}
		seen[string(buf)] = true
	}
	putForwarded(buf, forwardedAddrs+5)
	wrapped := string(buf)
	putForwarded(buf, 5)
	if wrapped != string(buf) {
		t.Fatalf("addresses do not wrap at %d: %q vs %q", forwardedAddrs, wrapped, buf)
	}
}
