package caddyhook

import (
	"strconv"
	"strings"
	"testing"
)

// TestIntegrationLockoutDefault (issue 13): the 20th failure locks for 60
// seconds from that failure; Retry-After counts down from 60.
func TestIntegrationLockoutDefault(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	bad := "Authorization: Bearer " + strings.Repeat("d", 40)
	for i := range 20 {
		if r := in.do("POST", "/hooks/wake", `{"text":"x"}`, bad); r.status != 401 {
			t.Fatalf("failure %d: %d", i+1, r.status)
		}
	}
	r := in.post("/hooks/wake", `{"text":"x"}`)
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	// 60 right after the locking failure; a slow machine may take a few
	// seconds to get here, the fixed-window rule would give the rest of the
	// window from the first failure
	if r.status != 429 || err != nil || secs > 60 || secs < 30 {
		t.Fatalf("after 20 failures: %d Retry-After %q, want 429 counting down from 60", r.status, r.header.Get("Retry-After"))
	}
}
