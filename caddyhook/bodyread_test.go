package caddyhook

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/lockout"
)

// TestUnauthReadsAllowance (issue 20 item 5): the unauthenticated reads in
// progress are capped per lockout key (an IPv4 address, an IPv6 /64) and
// in all; a locked address takes nothing from the shared slots, only a
// small declared body from an allowance of its own, within its per
// address cap. Steps run in order; each says what begin answers.
func TestUnauthReadsAllowance(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) {
		h.UnauthenticatedBodies = &UnauthenticatedBodies{Max: 4, PerAddress: 2}
	})
	u := h.bodies
	type step struct {
		name   string
		ip     string
		locked bool
		length int64 // declared body length (-1: chunked)
		end    bool  // give back a read of ip instead of taking one
		status int   // 0: taken
		reason string
	}
	for _, s := range []step{
		{name: "first of a /64", ip: "2001:db8::1", length: 100},
		{name: "second of the /64, another address", ip: "2001:db8::2", length: 100},
		{name: "third of the /64", ip: "2001:db8::3", length: 100, status: 503, reason: reasonTooManyFromAddr},
		{name: "another /64", ip: "2001:db8:0:1::1", length: 100},
		{name: "IPv4", ip: "192.0.2.1", length: 100},
		{name: "every shared slot taken", ip: "192.0.2.2", length: 100, status: 503, reason: reasonTooManyUnauth},
		{name: "a locked address: its own allowance", ip: "192.0.2.3", locked: true, length: 100},
		{name: "a locked address at its per-address cap", ip: "2001:db8::9", locked: true, length: 100, status: 429, reason: reasonLockedOut},
		{name: "a locked address, a body over the bound", ip: "192.0.2.4", locked: true, length: lockedBodyMax + 1, status: 429, reason: reasonLockedOut},
		{name: "a locked address, a chunked body", ip: "192.0.2.4", locked: true, length: -1, status: 429, reason: reasonLockedOut},
		{name: "a locked address, a body at the bound", ip: "192.0.2.4", locked: true, length: lockedBodyMax},
		{name: "one read of the /64 over", ip: "2001:db8::1", end: true},
		{name: "a slot free again", ip: "192.0.2.2", length: 100},
		{name: "the /64 has room again, the shared slots not", ip: "2001:db8::3", length: 100, status: 503, reason: reasonTooManyUnauth},
	} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/github", nil)
		r.ContentLength = s.length
		ex := &exchange{r: r, ip: netip.MustParseAddr(s.ip), now: time.Now()}
		if s.locked {
			ex.lockedFor = time.Minute
		}
		key := h.lockout.KeyOf(ex.ip)
		if s.end {
			u.end(ex, key)
			continue
		}
		herr := u.begin(ex, key)
		switch {
		case s.status == 0 && herr != nil:
			t.Fatalf("%s: %d %s, want the read taken", s.name, herr.status, herr.reason)
		case s.status != 0 && (herr == nil || herr.status != s.status || herr.reason != s.reason):
			t.Fatalf("%s: %+v, want %d %s", s.name, herr, s.status, s.reason)
		case herr != nil && herr.retryAfter <= 0:
			t.Fatalf("%s: no Retry-After", s.name)
		}
	}
	if n := len(u.slots); n != 4 {
		t.Fatalf("%d shared slots taken, want 4", n)
	}
	if n := len(u.locked); n != 2 {
		t.Fatalf("%d locked reads, want 2", n)
	}
}

// TestAddrCountsForget: a key's entry is gone once its reads are over, so
// the counts hold only addresses with a read in progress.
func TestAddrCountsForget(t *testing.T) {
	c := newAddrCounts(3)
	var k lockout.Key
	for i := range 1000 {
		k[0], k[1] = byte(i), byte(i>>8)
		if !c.take(k) || !c.take(k) {
			t.Fatal("take refused under the cap")
		}
		c.give(k)
		c.give(k)
	}
	for i := range c.shards {
		if n := len(c.shards[i].n); n != 0 {
			t.Fatalf("shard %d keeps %d entries after every read ended", i, n)
		}
	}
}
