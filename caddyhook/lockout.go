package caddyhook

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"go.uber.org/zap"
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

// lockedOut is the 429 of a locked address.
func lockedOut(left time.Duration) *hookError {
	return &hookError{status: http.StatusTooManyRequests, reason: reasonLockedOut, retryAfter: left}
}

// authFailed records a failed authentication and returns the 401; a
// request from a locked address (one that offered a signature) gets the
// 429 instead and is not counted again.
func (h *Handler) authFailed(ex *exchange, reason string) *hookError {
	return h.failure(ex, http.StatusUnauthorized, reason)
}

// failure counts a failure of ex's address and returns status and reason,
// or the 429 when the address is locked.
func (h *Handler) failure(ex *exchange, status int, reason string) *hookError {
	if ex.lockedFor > 0 {
		return lockedOut(ex.lockedFor)
	}
	h.metrics.authFailures.Inc()
	left, newly := h.lockout.Record(ex.ip, ex.now)
	if newly || left == 0 { // counted here: the other nodes count it too
		h.clusterFailure(ex.ip, ex.now, newly, ex.now.Add(left))
	}
	switch {
	case newly:
		h.logger.Warn("client locked out after repeated auth failures",
			zap.String("client_ip", ex.ip.String()),
			zap.Int("failures", h.AuthFailures.Count),
			zap.Duration("window", time.Duration(h.AuthFailures.Window)),
			zap.Duration("lockout", h.lockout.Policy().LockFor))
		h.events.lockedOut(ex.ip, ex.now.Add(left), h.base)
	case left > 0:
		// a concurrent request locked the address after this one's
		// lockout check: it learns nothing either
		return lockedOut(left)
	}
	return reject(status, reason)
}

// provisionLockout loads (or creates) the lockout table of this handler's
// identity. A lockout table created because a lockout setting changed
// takes over the addresses the identity's current table holds, so a
// reload does not release locked addresses.
func (h *Handler) provisionLockout(identity string) error {
	lp := lockout.Policy{
		MaxFailures: uint32(h.AuthFailures.Count),
		Window:      time.Duration(h.AuthFailures.Window),
		LockFor:     time.Duration(h.Lockout),
		V6Bits:      h.IPv6Prefix,
		Slots:       h.LockoutTableSize,
	}
	prefix := lockoutPoolPrefix + identity + "|"
	key := prefix + fmt.Sprintf("%+v", lp)
	t, loaded, err := hold(&h.held, key, func() (*lockout.Table, error) { return lockout.New(lp), nil })
	if err != nil {
		return err
	}
	h.lockout, h.lockoutKey = t, key
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
			h.lockout.Adopt(old, now)
		}
	}

	return nil
}

// provisionLockSync joins the cluster's lockout sharing: one LockSync per
// lockout table and namespace, so the handlers of a reload share the
// table and each remote failure is folded once.
func (h *Handler) provisionLockSync(b cluster.Backend, cs *clusterState, lockTTL time.Duration) error {
	key := clusterLockPoolPrefix + h.lockoutKey + "|" + cs.key
	table := h.lockout
	ls, _, err := hold(&h.held, key, func() (lockSyncShare, error) {
		s := cluster.NewLockSync(b, lockTarget{table}, cluster.LockSyncOptions{LockTTL: lockTTL,
			Window: time.Duration(h.AuthFailures.Window), Lockout: h.lockout.Policy().LockFor,
			Metrics: cs.metrics, Logger: h.logger.Named("cluster")})
		if err := s.Start(); err != nil {
			return lockSyncShare{}, fmt.Errorf("cluster: lockout sharing: %w", err)
		}
		g := syncGate{s}
		table.AddGate(g)
		return lockSyncShare{LockSync: s, table: table, gate: g}, nil
	})
	if err != nil {
		return err
	}
	cs.sync = ls.LockSync
	return nil
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

// clusterFailure tells the other nodes about the lock a failure of ip
// caused, until until (the failure itself was shared by the table).
func (h *Handler) clusterFailure(ip netip.Addr, _ time.Time, locked bool, until time.Time) {
	if h.cluster == nil || !locked {
		return
	}
	h.cluster.sync.Locked(cluster.Addr(h.lockout.KeyOf(ip)), until)
}

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
