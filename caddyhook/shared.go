package caddyhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/idempotency"
)

// sharedPool holds the state that must survive a config reload: the
// lockout tables, idempotency caches, spools and the transform cache. Each
// handler takes its share in Provision (recording the key in poolKeys) and
// gives it back in Cleanup, so the pool's reference counts say which state
// a running config still uses.
//
// What is shared, and with whom:
//   - a lockout table and an idempotency cache belong to one handler
//     identity (see handlerIdentity): the same handler in the old and the
//     new config of a reload shares them, two different handlers never do;
//   - a spool belongs to its directory; handlers of one config may not
//     share one, and across a reload the running config keeps delivering
//     through its own gateway until it is cleaned up (see spoolShare);
//   - the transform cache is process-wide on purpose: it holds compiled
//     programs keyed by file and content, which behave the same for any
//     handler.
var sharedPool = caddy.NewUsagePool()

// Pool key prefixes.
const (
	lockoutPoolPrefix     = "hooks.lockout|"
	idempotencyPoolPrefix = "hooks.idempotency|"
	spoolPoolPrefix       = "hooks.spool|"
)

// handlerIdentity is everything that makes two hooks handlers different
// as far as their lockout table and idempotency cache go: the server they
// belong to (its listener addresses), the base path, the gateway they
// deliver to (address, prefix, credentials) and the policy that shapes
// what they send. Two handlers with the same identity would send the same
// request to the same gateway for the same input, so an idempotent replay
// answered from either is the answer the other would give; a handler with
// another gateway or policy gets state of its own. The hook token is left
// out on purpose, so that rotating it keeps the state.
//
// Two sites on one server (told apart only by their host names) with the
// same base path, gateway and policy do share their state: they guard the
// same gateway in the same way. Give them different base paths to keep
// them apart.
func (h *Handler) handlerIdentity(ctx caddy.Context, gateway gatewayAddr, gatewayToken string) string {
	var listen []string
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		listen = slices.Sorted(slices.Values(srv.Listen))
	}
	policy, _ := json.Marshal(struct {
		Agents                    []string  `json:"a"`
		AllowedAgentIDs           *[]string `json:"b"`
		DefaultSessionKey         string    `json:"c"`
		AllowRequestSessionKey    bool      `json:"d"`
		AllowedSessionKeyPrefixes []string  `json:"e"`
		AllowedModels             []string  `json:"f"`
		Channels                  []string  `json:"g"`
	}{h.Agents, h.AllowedAgentIDs, h.DefaultSessionKey, h.AllowRequestSessionKey,
		h.AllowedSessionKeyPrefixes, h.AllowedModels, h.Channels})
	sum := sha256.Sum256(fmt.Appendf(nil, "%q|%q|%q|%q|%q|%s|%t",
		strings.Join(listen, ","), h.base, gateway.network+"/"+gateway.address, h.gateway.prefix,
		gatewayToken, policy, h.GatewayForwardClientIP))
	return hex.EncodeToString(sum[:12])
}

// provisionShared loads (or creates) the lockout table and idempotency
// cache of this handler's identity. A lockout table created because a
// lockout setting changed takes over the addresses the identity's current
// table holds, so a reload does not release locked addresses.
func (h *Handler) provisionShared(identity string) error {
	lp := lockoutPolicy{
		maxFailures: uint32(h.AuthFailures.Count),
		window:      time.Duration(h.AuthFailures.Window),
		lockFor:     time.Duration(h.Lockout),
		v6Bits:      h.IPv6Prefix,
		slots:       h.LockoutTableSize,
	}
	prefix := lockoutPoolPrefix + identity + "|"
	key := prefix + fmt.Sprintf("%+v", lp)
	v, loaded, err := sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newLockoutTable(lp), nil
	})
	if err != nil {
		return err
	}
	h.poolKeys = append(h.poolKeys, key)
	h.lockout, h.lockoutKey = v.(*lockoutTable), key
	if !loaded {
		var previous []*lockoutTable
		sharedPool.Range(func(k, v any) bool {
			if s, ok := k.(string); ok && s != key && strings.HasPrefix(s, prefix) {
				previous = append(previous, v.(*lockoutTable))
			}
			return true
		})
		now := time.Now()
		for _, old := range previous {
			h.lockout.adopt(old, now)
		}
	}

	ttl := time.Duration(h.IdempotencyTTL)
	key = idempotencyPoolPrefix + identity + "|" + ttl.String()
	v, _, err = sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return idempotency.New(ttl), nil
	})
	if err != nil {
		return err
	}
	h.poolKeys = append(h.poolKeys, key)
	h.idem = v.(*idempotency.Cache)
	return nil
}

// releaseShared gives back everything provisionShared, provisionSpool and
// the transforms took from the pool, in reverse order; it may run more
// than once.
func (h *Handler) releaseShared() {
	for _, r := range []**spoolReg{&h.fallbackReg, &h.spoolReg} {
		if *r != nil {
			(*r).release()
			*r = nil
		}
	}
	for i := len(h.poolKeys) - 1; i >= 0; i-- {
		_, _ = sharedPool.Delete(h.poolKeys[i])
	}
	h.poolKeys = nil
}
