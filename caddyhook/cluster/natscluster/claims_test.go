package natscluster

import (
	"bytes"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// TestPendingClaimsAreDistinct: a claim whose create answered "exists" is
// this node's own only when the bucket holds its very bytes, so no two
// claims may encode alike. Before, two requests of one key claiming on
// one node in the same millisecond wrote equal bytes and both took the
// key (TestIdempotencyAcrossNodes/concurrent dispatched one key twice in
// about 1 of 25 runs under -race).
func TestPendingClaimsAreDistinct(t *testing.T) {
	level := 0
	cfg := &Config{SigningKeys: []string{testSigningKey}, level: &level}
	if err := cfg.validateTrust(); err != nil {
		t.Fatal(err)
	}
	s := &shared{cfg: cfg, p: cluster.Params{Name: "t", IdempotencyTTL: time.Hour}, node: "n1", n: namesFor("t")}
	s.initVersions()
	c := &claims{s: s}
	lease := time.Now().Add(time.Minute)
	seen := make(map[string]bool)
	for i := range 1000 {
		// stored "before" it was written: fresh however long this machine
		// pauses between the two, and the lease's end left as written
		before := time.Now()
		b := c.pending("k", lease)
		if seen[string(b)] {
			t.Fatalf("claim %d encodes as an earlier one", i)
		}
		seen[string(b)] = true
		r, trusted, err := c.decode(goldenEntry{key: "k", value: b, rev: 1, created: before}, time.Minute)
		if err != nil || !trusted {
			t.Fatalf("claim %d: decode: trusted %v, %v", i, trusted, err)
		}
		if !r.Pending || r.Node != "n1" || r.Until != lease.UnixMilli() || len(r.Claim) != 16 || bytes.Equal(r.Claim, make([]byte, 16)) {
			t.Fatalf("claim %d read back as %+v", i, r)
		}
	}
}
