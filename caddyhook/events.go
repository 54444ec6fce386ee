package caddyhook

import (
	"net/netip"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
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
