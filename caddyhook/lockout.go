package caddyhook

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/lockout"
)

// lockoutEventName is the Caddy event emitted when an address is locked
// out. Its data: "address" (the locked client address, or for IPv6 the
// address as given, whose /ipv6_prefix network is locked), "until" (RFC
// 3339, UTC), "until_unix" (seconds) and "path" (the handler's base path).
// An `events` subscription can act on it, for example
//
//	{
//		events {
//			on hooks_lockout exec /usr/local/bin/block {event.data.address} {event.data.until_unix}
//		}
//	}
//
// (with an events handler module such as caddy-events-exec).
const lockoutEventName = "hooks_lockout"

// lockoutEvents emits lockoutEventName on the config's events app.
type lockoutEvents struct {
	app *caddyevents.App
	ctx caddy.Context // the handler's: makes the handler the event's origin
}

// newLockoutEvents returns nil when the config has no events app, so that
// nothing is emitted (or allocated) without a subscriber.
func newLockoutEvents(ctx caddy.Context) *lockoutEvents {
	a, err := ctx.AppIfConfigured("events")
	if err != nil {
		return nil
	}
	app, ok := a.(*caddyevents.App)
	if !ok {
		return nil
	}
	return &lockoutEvents{app: app, ctx: ctx}
}

// lockedOut emits the event for ip, locked until until. Handlers run
// synchronously, once per lockout.
func (e *lockoutEvents) lockedOut(ip netip.Addr, until time.Time, base string) {
	if e == nil || !e.app.ShouldEmit(lockoutEventName) {
		return
	}
	until = until.UTC().Truncate(time.Second)
	e.app.Emit(e.ctx, lockoutEventName, map[string]any{
		"address":    ip.String(),
		"until":      until.Format(time.RFC3339),
		"until_unix": until.Unix(),
		"path":       base,
	})
}

// reasonLockedOut is the reason of a locked address's 429.
const reasonLockedOut = "locked out"

// lockedOut is the 429 of a locked address.
func lockedOut(left time.Duration) *hookError {
	return &hookError{status: http.StatusTooManyRequests, reason: reasonLockedOut, retryAfter: left}
}

// lockoutGuard is the handler's lockout accounting: its lockout table
// (shared across reloads by the handlers of one identity; its methods
// Locked, Reset, KeyOf, … are the guard's), the failures it counts, logs
// and announces (the hooks_lockout event), and, in a cluster, the lock
// sharing.
type lockoutGuard struct {
	*lockout.Table
	key      string // the table's pool key
	maxFails int    // auth_failures count, for the log
	window   time.Duration
	v6bits   int    // ipv6_prefix
	base     string // the handler's base path, for the event
	metrics  *hookMetrics
	events   *lockoutEvents
	logger   *zap.Logger
	sync     *cluster.LockSync // nil without a cluster engine
	// uncount stops counting the table's locked addresses in
	// active_lockouts.
	uncount func()
}

// newLockoutGuard makes the guard of a handler of identity over its
// table (holdLockoutTable), counted by metrics until release.
func newLockoutGuard(table *lockout.Table, key, identity string, s lockoutSettings, base string,
	metrics *hookMetrics, events *lockoutEvents, logger *zap.Logger) *lockoutGuard {
	return &lockoutGuard{Table: table, key: key, maxFails: s.count, window: s.window, v6bits: s.v6bits, base: base,
		metrics: metrics, events: events, logger: logger, uncount: metrics.countLockouts(identity, table)}
}

// release stops counting the table in active_lockouts; it may run more
// than once (and on nil).
func (g *lockoutGuard) release() {
	if g != nil && g.uncount != nil {
		g.uncount()
	}
}

// lockoutSettings are the lockout options of a handler.
type lockoutSettings struct {
	count   int
	window  time.Duration
	lockFor time.Duration
	v6bits  int
	slots   int
}

// holdLockoutTable loads (or creates) the lockout table of identity
// under settings s. A lockout table created because a lockout setting
// changed takes over the addresses the identity's current table holds,
// so a reload does not release locked addresses. It returns the table and
// its pool key.
func holdLockoutTable(held *poolHold, identity string, s lockoutSettings) (*lockout.Table, string, error) {
	lp := lockout.Policy{
		MaxFailures: uint32(s.count),
		Window:      s.window,
		LockFor:     s.lockFor,
		V6Bits:      s.v6bits,
		Slots:       s.slots,
	}
	prefix := lockoutPoolPrefix + identity + "|"
	key := prefix + fmt.Sprintf("%+v", lp)
	t, loaded, err := hold(held, key, func() (*lockout.Table, error) { return lockout.New(lp), nil })
	if err != nil {
		return nil, "", err
	}
	if !loaded {
		var previous []*lockout.Table
		sharedPool.Range(func(k, v any) bool {
			if s, ok := k.(string); ok && s != key && strings.HasPrefix(s, prefix) {
				previous = append(previous, v.(*lockout.Table))
			}
			return true
		})
		now := time.Now()
		for _, old := range previous {
			t.Adopt(old, now)
		}
	}
	return t, key, nil
}

// count counts a refusal that herr marks as an authentication failure
// (herr.counts) against ex's address and returns it as the answer, or the
// 429 when the address is locked: a request from a locked address (one
// that offered a signature) is not counted again. Any other herr (nil
// too) is returned as it is.
func (g *lockoutGuard) count(ex *exchange, herr *hookError) *hookError {
	if herr == nil || !herr.counts {
		return herr
	}
	herr.counts = false
	if ex.lockedFor > 0 {
		return lockedOut(ex.lockedFor)
	}
	g.metrics.observeAuthFailure()
	left, newly := g.Record(ex.ip, ex.now)
	if newly && g.sync != nil { // counted here: the other nodes count it too
		g.sync.Locked(cluster.Addr(g.KeyOf(ex.ip)), ex.now.Add(left))
	}
	switch {
	case newly:
		g.logger.Warn("client locked out after repeated auth failures",
			zap.String("client_ip", ex.ip.String()),
			zap.Int("failures", g.maxFails),
			zap.Duration("window", g.window),
			zap.Duration("lockout", g.Policy().LockFor))
		g.events.lockedOut(ex.ip, ex.now.Add(left), g.base)
	case left > 0:
		// a concurrent request locked the address after this one's
		// lockout check: it learns nothing either
		return lockedOut(left)
	}
	return herr
}

// display is a lockout key as an address (and its IPv6 grouping: the
// prefix length when the key stands for a network).
func (g *lockoutGuard) display(key lockout.Key) (netip.Addr, int) {
	ip := netip.AddrFrom16(key).Unmap()
	if ip.Is6() && g.v6bits < 128 {
		return ip, g.v6bits
	}
	return ip, 0
}

// joinCluster joins the cluster's lockout sharing: one LockSync per
// lockout table and namespace (nsKey), so the handlers of a reload share
// the table and each remote failure is folded once.
func (g *lockoutGuard) joinCluster(held *poolHold, b cluster.Backend, nsKey string, metrics *cluster.Metrics, lockTTL time.Duration) (*cluster.LockSync, error) {
	key := clusterLockPoolPrefix + g.key + "|" + nsKey
	table := g.Table
	ls, _, err := hold(held, key, func() (lockSyncShare, error) {
		s := cluster.NewLockSync(b, lockTarget{table}, cluster.LockSyncOptions{LockTTL: lockTTL,
			Window: g.window, Lockout: table.Policy().LockFor,
			Metrics: metrics, Logger: g.logger.Named("cluster")})
		if err := s.Start(); err != nil {
			return lockSyncShare{}, fmt.Errorf("cluster: lockout sharing: %w", err)
		}
		gate := syncGate{s}
		table.AddGate(gate)
		return lockSyncShare{LockSync: s, table: table, gate: gate}, nil
	})
	if err != nil {
		return nil, err
	}
	g.sync = ls.LockSync
	return ls.LockSync, nil
}

// lockSyncShare is a LockSync in the usage pool, the gate of its table.
type lockSyncShare struct {
	*cluster.LockSync
	table *lockout.Table
	gate  syncGate
}

// Destruct stops the sharing when the last handler using it is gone.
func (s lockSyncShare) Destruct() error {
	s.table.RemoveGate(s.gate)
	s.Close()
	return nil
}

// syncGate is a LockSync as its table's lockout.Gate: the table shares
// each local failure before it counts it, and answers an address the
// LockSync holds back as locked.
type syncGate struct{ s *cluster.LockSync }

// Held implements lockout.Gate.
func (g syncGate) Held(k lockout.Key) bool { return g.s.Held(cluster.Addr(k)) }

// Share implements lockout.Gate.
func (g syncGate) Share(k lockout.Key, at time.Time) bool { return g.s.Failure(cluster.Addr(k), at) }

// lockTarget is a lockout table as the LockSync's cluster.LockTarget:
// the failures this node owns and the other nodes' locks are folded into
// it.
type lockTarget struct{ t *lockout.Table }

// FoldFailure implements cluster.LockTarget.
func (l lockTarget) FoldFailure(a cluster.Addr, at time.Time) (time.Time, bool) {
	return l.t.FoldFailure(lockout.Key(a), at)
}

// ApplyLock implements cluster.LockTarget.
func (l lockTarget) ApplyLock(a cluster.Addr, until time.Time) bool {
	return l.t.ApplyLock(lockout.Key(a), until)
}

// Interface guards
var (
	_ cluster.LockTarget = lockTarget{}
	_ lockout.Gate       = syncGate{}
)
