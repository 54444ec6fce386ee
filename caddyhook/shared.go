package caddyhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// sharedPool holds the state that must survive a config reload: lockout
// tables and idempotency caches (and spools), keyed by their settings.
var sharedPool = caddy.NewUsagePool()

// provisionShared loads (or creates) the lockout table and idempotency
// cache for this handler's settings from the usage pool.
func (h *Handler) provisionShared() error {
	lp := lockoutPolicy{
		maxFailures: uint32(h.AuthFailures.Count),
		window:      time.Duration(h.AuthFailures.Window),
		lockFor:     time.Duration(h.Lockout),
		v6Bits:      h.IPv6Prefix,
		slots:       h.LockoutTableSize,
	}
	key := fmt.Sprintf("hooks.lockout|%s|%+v", h.base, lp)
	v, _, err := sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newLockoutTable(lp), nil
	})
	if err != nil {
		return err
	}
	h.poolKeys = append(h.poolKeys, key)
	h.lockout = v.(*lockoutTable)

	ttl := time.Duration(h.IdempotencyTTL)
	key = fmt.Sprintf("hooks.idempotency|%s|%s", h.base, ttl)
	v, _, err = sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newIdemCache(ttl), nil
	})
	if err != nil {
		return err
	}
	h.poolKeys = append(h.poolKeys, key)
	h.idem = v.(*idemCache)
	return nil
}

// sha256Sum hashes a secret for constant-time comparison.
func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

// constantTimeEqual compares two secrets without leaking where they differ.
func constantTimeEqual(a, b string) bool {
	da, db := sha256Sum(a), sha256Sum(b)
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// distinctBytes counts the different bytes in s.
func distinctBytes(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}
