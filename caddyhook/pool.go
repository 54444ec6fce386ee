package caddyhook

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
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
	for _, v := range slices.Backward(p.keys) {
		_, _ = sharedPool.Delete(v)
	}
	p.keys = nil
}
