package caddyhook

import (
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/lockout"
)

// The admin routes of the handlers' status, the running build's version
// and the lockouts (adminRoutes in admin_routes.go lists them).

// Limits of GET /hooks/lockouts.
const (
	defaultLockoutsList = 10_000 // lockouts listed without ?limit
	maxLockoutsList     = 1_000_000
)

// serveStatus answers GET /hooks/ for every handler, or the ?path one.
func serveStatus(w http.ResponseWriter, r *http.Request, _ *liveHandler, _ string) error {
	all := liveHandlers()
	if r.URL.Query().Has("path") || r.URL.Query().Has("server") {
		lh, err := selectHandler(r)
		if err != nil {
			return err
		}
		all = []liveHandler{*lh}
	}
	out := make([]adminapi.HandlerStatus, 0, len(all))
	now := time.Now()
	for _, lh := range all {
		v := lh.view
		slots, timeout, perAddr, perPrefix := v.bodies.settings()
		st := adminapi.HandlerStatus{Path: v.base, Server: lh.server,
			ActiveLockouts: v.lockout.Active(now), IdempotencyEntries: v.idem.Len(),
			Settings: adminapi.Settings{UnauthenticatedBodies: slots, UnauthenticatedTimeoutSecond: timeout.Seconds(),
				UnauthenticatedPerAddress: perAddr,
				LockoutTableSize:          v.lockout.Capacity(), IdempotencyTTLSeconds: v.idem.TTL().Seconds()}}
		for _, pc := range perPrefix {
			st.Settings.UnauthenticatedPerPrefix = append(st.Settings.UnauthenticatedPerPrefix, adminapi.PrefixCap{Bits: pc.Bits, Max: pc.Max})
		}
		if v.events != nil {
			st.Events = v.events.status()
		}
		if v.cluster != nil {
			st.Cluster = v.cluster.status()
		}
		if v.spool != nil {
			// a spool whose counters cannot be read (the cluster queue
			// while NATS is down) is reported with its error; the other
			// handlers and this one's local state are still answered
			s, err := v.spool.Status()
			st.Spool = adminapi.SpoolOf(v.spoolDir, s, err)
		}
		out = append(out, st)
	}
	return writeAdminJSON(w, out)
}

// serveVersion answers GET /hooks/version: the running build's version,
// cluster level, admin API version and formats.
func serveVersion(w http.ResponseWriter, _ *http.Request, _ *liveHandler, _ string) error {
	return writeAdminJSON(w, adminapi.VersionOf())
}

// serveLockouts lists the locked addresses, soonest released first (at
// most ?limit, default 10,000).
func serveLockouts(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	limit := defaultLockoutsList
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLockoutsList {
			return apiError(http.StatusBadRequest, "limit: want a number between 1 and %d", maxLockoutsList)
		}
		limit = n
	}
	locks := lh.view.lockout.Locks(time.Now(), limit)
	slices.SortFunc(locks, func(a, b lockout.Lock) int {
		if c := a.Until.Compare(b.Until); c != 0 {
			return c
		}
		return strings.Compare(a.Addr, b.Addr)
	})
	out := make([]adminapi.Lockout, len(locks))
	for i, l := range locks {
		out[i] = adminapi.Lockout{Address: l.Addr, Until: l.Until.UTC()}
	}
	return writeAdminJSON(w, out)
}

// serveLift answers DELETE /hooks/lockouts/<address>: 200 when the lockout
// was lifted, 404 when the address was not locked.
func serveLift(w http.ResponseWriter, r *http.Request, lh *liveHandler, arg string) error {
	ip, err := netip.ParseAddr(arg)
	if err != nil {
		p, perr := netip.ParsePrefix(arg)
		if perr != nil {
			return apiError(http.StatusBadRequest, "%q is not an IP address (or IPv6 prefix)", arg)
		}
		ip = p.Addr()
	}
	if !lh.view.lockout.Lift(ip, time.Now()) {
		return apiError(http.StatusNotFound, "%s is not locked out", ip)
	}
	lh.view.events.operator(r, "unlock", ip.String(), "lockout lifted")
	lh.view.logger.Info("lockout lifted through the admin API", zap.String("client_ip", ip.String()), zap.String("operator", operatorOf(r)))
	return writeAdminJSON(w, map[string]string{"lifted": ip.String()})
}
