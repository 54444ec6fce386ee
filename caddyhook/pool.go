package caddyhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// sharedPool holds the state that must survive a config reload: the
// lockout tables, idempotency caches, spools and the transform cache. Each
// handler takes its share in Provision (through hold, which records the
// key) and gives it back in Cleanup (poolHold.release), so the pool's
// reference counts say which state a running config still uses.
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

// The keys in sharedPool: a prefix and what tells the values apart, or
// one key for a process-wide value.
const (
	lockoutPoolPrefix     = "hooks.lockout|"     // handler identity, lockout settings
	idempotencyPoolPrefix = "hooks.idempotency|" // handler identity, TTL
	spoolPoolPrefix       = "hooks.spool|"       // directory, or "cluster|" and the engine key
	eventsPoolPrefix      = "hooks.events|"      // listeners, base path, directory
	adminPoolPrefix       = "hooks.admin|"       // the handler
	clusterLockPoolPrefix = "hooks.cluster.lockout|"
	clusterMetricsKey     = "hooks.cluster.metrics"
	metricsPoolKey        = "hooks.metrics"
	transformsPoolKey     = "hooks.transforms"
	consoleSecretKey      = "hooks.console.csrf"
)

// poolHold is what a module holds in sharedPool. Every value is taken
// through hold, which records its key, and given back by release, so a
// Cleanup cannot miss one.
type poolHold struct{ keys []string }

// hold takes the value under key in sharedPool, making it with mk when no
// running module holds one, and records the key in p; loaded says the
// value was there already.
func hold[T caddy.Destructor](p *poolHold, key string, mk func() (T, error)) (v T, loaded bool, err error) {
	got, loaded, err := sharedPool.LoadOrNew(key, func() (caddy.Destructor, error) { return mk() })
	if err != nil {
		return v, false, err
	}
	p.keys = append(p.keys, key)
	return got.(T), loaded, nil
}

// release gives back every value p holds, the last taken first; it may
// run more than once.
func (p *poolHold) release() {
	for i := len(p.keys) - 1; i >= 0; i-- {
		_, _ = sharedPool.Delete(p.keys[i])
	}
	p.keys = nil
}

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

// releaseShared gives back the spool registrations and everything the
// handler holds in the pool, the last taken first; it may run more than
// once.
func (h *Handler) releaseShared() {
	for _, r := range []**spoolReg{&h.fallbackReg, &h.spoolReg} {
		if *r != nil {
			(*r).release()
			*r = nil
		}
	}
	h.held.release()
}
