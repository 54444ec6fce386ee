package main

import (
	"net/netip"
	"sync/atomic"
)

// sourceKind says where a row's requests appear to come from.
type sourceKind uint8

const (
	// srcLoopback: every connection from 127.0.0.1.
	srcLoopback sourceKind = iota
	// srcLocked: every connection from lockedAddr, the address row (f)
	// locks out first.
	srcLocked
	// srcSpread: each connection binds a fresh 127/8 source address and
	// is replaced by one from another address after perAddr requests, so
	// no address reaches the lockout threshold.
	srcSpread
	// srcForwarded: connections from 127.0.0.1 (a trusted proxy) with a
	// different X-Forwarded-For address on every request.
	srcForwarded
)

// lockedAddr is the client address row (f) locks out. It is outside the
// ranges of the other rows so the lock touches nothing else.
var lockedAddr = netip.MustParseAddr("127.0.0.66")

// spreadAddrs hands out distinct loopback source addresses, 127.1.0.1
// upwards (skipping .0 and .255 host parts). A run never reuses one, so
// failures from earlier segments never add up.
type spreadAddrs struct{ next atomic.Uint32 }

// take returns the next unused address.
func (s *spreadAddrs) take() netip.Addr {
	for {
		n := s.next.Add(1) - 1 + 1<<16 // 127.1.0.0 and up
		b := [4]byte{127, byte(n >> 16), byte(n >> 8), byte(n)}
		if b[3] != 0 && b[3] != 255 {
			return netip.AddrFrom4(b)
		}
	}
}

// forwardedWidth is the fixed width of the X-Forwarded-For values, so a
// request template can be rewritten in place.
const forwardedWidth = len("10.100.100.100")

// forwardedAddrs is the number of distinct X-Forwarded-For addresses
// (10.100-199.100-199.100-199): at tens of thousands of requests a
// second each one sees about one failure per lockout window.
const forwardedAddrs = 100 * 100 * 100

// putForwarded writes the n-th forwarded address (mod forwardedAddrs)
// into dst, which must be forwardedWidth bytes.
func putForwarded(dst []byte, n uint64) {
	n %= forwardedAddrs
	copy(dst, "10.")
	put3(dst[3:], 100+n/10000)
	dst[6] = '.'
	put3(dst[7:], 100+n/100%100)
	dst[10] = '.'
	put3(dst[11:], 100+n%100)
}

// put3 writes a three-digit number.
func put3(dst []byte, v uint64) {
	dst[0], dst[1], dst[2] = '0'+byte(v/100), '0'+byte(v/10%10), '0'+byte(v%10)
}
