package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/version"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// Admin API limits.
const (
	maxAdminBody        = 1 << 20 // a retry/drop request
	defaultLockoutsList = 10_000  // lockouts listed without ?limit
	maxLockoutsList     = 1_000_000
)

// adminAPI is the `admin.api.hooks` module: routes under /hooks/ on Caddy's
// admin endpoint (so its access control applies: localhost or a Unix
// socket by default, mTLS for remote admin) to look at and operate the
// running hooks handlers:
//
//	GET    /hooks/                    each handler: base path, spool status, active lockouts, idempotency entries
//	GET    /hooks/version             the running build: version, cluster level, admin API version, formats
//	GET    /hooks/lockouts            [{"address", "until"}]
//	DELETE /hooks/lockouts/<address>  lifts one lockout (404 if not locked)
//	GET    /hooks/spool/dead          the dead letters (?body=1: with the stored gateway request)
//	POST   /hooks/spool/dead/retry    {"ids": [...]} or {"all": true} → {"retried": N}
//	POST   /hooks/spool/dead/drop     {"ids": [...]} or {"all": true} → {"dropped": N}
//	POST   /hooks/spool/pause         delivery stops; accepting continues
//	POST   /hooks/spool/resume        delivery continues where it stopped
//	GET    /hooks/events              the event log, newest first (see eventlog_admin.go)
//	GET    /hooks/events/<id>         one event; POST …/<id>/replay dispatches it again
//	GET    /hooks/events/stream       the live tail (Server-Sent Events)
//	GET    /hooks/events/rates        the last hour's rates
//	GET    /hooks/console             the console page (see console.go)
//
// With several hooks handlers, ?path=<base path> (and ?server=<name> when
// two servers use the same base path) selects one. No answer carries a
// token or secret. Every answer carries the admin API's version in the
// Hooks-Api-Version header (internal/version.API).
type adminAPI struct {
	ctx caddy.Context // its config's: ends the live tails when it is replaced
}

// CaddyModule returns the Caddy module information.
func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.hooks",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Provision keeps the config's context: the admin endpoint is replaced
// with every config, and a live tail of the old one must end.
func (a *adminAPI) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	return nil
}

// Routes returns the /hooks/ route.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: adminapi.Prefix, Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// adminRoute is one endpoint: its method and what it does for the
// selected handler (nil handler: the endpoint lists every handler).
type adminRoute struct {
	method string
	serve  func(w http.ResponseWriter, r *http.Request, lh *liveHandler, arg string) error
}

// serve dispatches an admin request by path and method.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	sub := strings.TrimPrefix(r.URL.Path, adminapi.Prefix)
	if sub == "console" || strings.HasPrefix(sub, "console/") {
		return serveConsole(w, r, consoleOnAdmin, strings.TrimPrefix(strings.TrimPrefix(sub, "console"), "/"))
	}
	if a.ctx.Context != nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(a.ctx, cancel)()
		r = r.WithContext(ctx)
	}
	return serveAPI(w, r, sub)
}

// serveAPI answers the API request sub (the path below /hooks/): on the
// admin endpoint, and below a hooks_console handler's api/ path.
func serveAPI(w http.ResponseWriter, r *http.Request, sub string) error {
	w.Header().Set(version.APIHeader, strconv.Itoa(version.API))
	var rt adminRoute
	var arg string
	switch {
	case sub == "version":
		rt = adminRoute{http.MethodGet, serveVersion}
	case sub == "events" || strings.HasPrefix(sub, "events/"):
		rt, arg = eventsRoute(strings.TrimPrefix(strings.TrimPrefix(sub, "events"), "/"))
	case sub == "":
		rt = adminRoute{http.MethodGet, serveStatus}
	case sub == "lockouts":
		rt = adminRoute{http.MethodGet, serveLockouts}
	case strings.HasPrefix(sub, "lockouts/"):
		rt, arg = adminRoute{http.MethodDelete, serveLift}, strings.TrimPrefix(sub, "lockouts/")
	case sub == "spool/dead":
		rt = adminRoute{http.MethodGet, serveDeadLetters}
	case sub == "spool/dead/retry":
		rt, arg = adminRoute{http.MethodPost, serveRetryDrop}, "retried"
	case sub == "spool/dead/drop":
		rt, arg = adminRoute{http.MethodPost, serveRetryDrop}, "dropped"
	case sub == "spool/pause", sub == "spool/resume":
		rt, arg = adminRoute{http.MethodPost, servePause}, strings.TrimPrefix(sub, "spool/")
	default:
		return apiError(http.StatusNotFound, "no such hooks admin endpoint: %s", r.URL.Path)
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		return apiError(http.StatusMethodNotAllowed, "%s %s: method not allowed (use %s)", r.Method, r.URL.Path, rt.method)
	}
	if sub == "" || sub == "version" {
		return rt.serve(w, r, nil, arg)
	}
	lh, err := selectHandler(r)
	if err != nil {
		return err
	}
	return rt.serve(w, r, lh, arg)
}

// eventsStatus summarises h's event log (nil with events off).
func eventsStatus(h *Handler) *adminapi.Events {
	rec := h.evrec
	if rec == nil {
		return nil
	}
	b := rec.log.Bounds()
	es := &adminapi.Events{Bodies: rec.bodies, MaxBody: rec.maxBody, MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes,
		RetainSeconds: b.Retain.Seconds(), MaxRejections: b.MaxRejections}
	if h.Events != nil {
		es.Dir = h.Events.Dir
	}
	for name := range rec.allow {
		if !slices.Contains(defaultEventHeaders, name) {
			es.Headers = append(es.Headers, name)
		}
	}
	slices.Sort(es.Headers)
	return es
}

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
		st := adminapi.HandlerStatus{Path: lh.h.base, Server: lh.server,
			ActiveLockouts: lh.h.lockout.Active(now), IdempotencyEntries: lh.h.idem.Len(),
			Settings: adminapi.Settings{UnauthenticatedBodies: cap(lh.h.unauth.slots), UnauthenticatedTimeoutSecond: lh.h.unauth.timeout.Seconds(),
				UnauthenticatedPerAddress: int(lh.h.unauth.perAddr.max),
				LockoutTableSize:          lh.h.lockout.Capacity(), IdempotencyTTLSeconds: lh.h.idem.TTL().Seconds()}}
		st.Events = eventsStatus(lh.h)
		if cs := lh.h.cluster; cs != nil {
			st.Cluster = &adminapi.Cluster{Name: cs.name, Up: cs.backend.Up()}
			if d, ok := cs.backend.(cluster.Describer); ok {
				st.Cluster.Settings = d.Settings()
			}
			if r, ok := cs.backend.(cluster.Redundant); ok {
				st.Cluster.SetRedundancy(r.Redundancy())
			}
		}
		if lh.h.spoolOps != nil {
			// a spool whose counters cannot be read (the cluster queue
			// while NATS is down) is reported with its error; the other
			// handlers and this one's local state are still answered
			s, err := lh.h.spoolOps.Status()
			st.Spool = adminapi.SpoolOf(lh.h.spoolDir, s, err)
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
	locks := lh.h.lockout.Locks(time.Now(), limit)
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
func serveLift(w http.ResponseWriter, _ *http.Request, lh *liveHandler, arg string) error {
	ip, err := netip.ParseAddr(arg)
	if err != nil {
		p, perr := netip.ParsePrefix(arg)
		if perr != nil {
			return apiError(http.StatusBadRequest, "%q is not an IP address (or IPv6 prefix)", arg)
		}
		ip = p.Addr()
	}
	if !lh.h.lockout.Lift(ip, time.Now()) {
		return apiError(http.StatusNotFound, "%s is not locked out", ip)
	}
	lh.h.logger.Info("lockout lifted through the admin API", zap.String("client_ip", ip.String()))
	return writeAdminJSON(w, map[string]string{"lifted": ip.String()})
}

// liveHandler is a hooks handler of the running config.
type liveHandler struct {
	h      *Handler
	server string // the http server (site listener) it belongs to
}

// selectHandler picks the handler named by ?path (and ?server), or the only
// one; several without a choice is a 400 naming them.
func selectHandler(r *http.Request) (*liveHandler, error) {
	q := r.URL.Query()
	path, server := strings.TrimRight(q.Get("path"), "/"), q.Get("server")
	all := liveHandlers()
	var match []liveHandler
	for _, lh := range all {
		if (path == "" || lh.h.base == path) && (server == "" || lh.server == server) {
			match = append(match, lh)
		}
	}
	switch {
	case len(match) == 1:
		return &match[0], nil
	case len(all) == 0:
		return nil, apiError(http.StatusNotFound, "no hooks handler in the running config")
	case len(match) == 0:
		return nil, apiError(http.StatusNotFound, "no hooks handler at path=%q server=%q; the handlers are: %s", path, server, handlerChoices(all))
	case path == "" && server == "":
		return nil, apiError(http.StatusBadRequest, "several hooks handlers: choose one with ?path= (%s)", handlerChoices(all))
	}
	return nil, apiError(http.StatusBadRequest, "several hooks handlers match; add ?server= (%s)", handlerChoices(match))
}

// handlerChoices names handlers for an error message.
func handlerChoices(hs []liveHandler) string {
	names := make([]string, len(hs))
	for i, lh := range hs {
		names[i] = "path=" + lh.h.base
		if lh.server != "" {
			names[i] += " server=" + lh.server
		}
	}
	return strings.Join(names, ", ")
}

// adminEntry is a provisioned handler's registration with the admin API,
// held in the usage pool from Provision to Cleanup.
type adminEntry struct {
	h      *Handler
	server *caddyhttp.Server // the server whose routes hold h (nil outside the http app)
}

// Destruct implements caddy.Destructor; the handler cleans up itself.
func (*adminEntry) Destruct() error { return nil }

// registerAdmin makes h visible to the admin API until its Cleanup.
func (h *Handler) registerAdmin(ctx caddy.Context) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	_, _, _ = hold(&h.held, fmt.Sprintf(adminPoolPrefix+"%p", h), func() (*adminEntry, error) {
		return &adminEntry{h: h, server: srv}, nil
	})
}

// liveHandlers returns the registered handlers of the running config,
// ordered by base path and server. During a reload the new config's
// handlers are registered before they serve and the old ones until their
// Cleanup; the running config's http servers tell them apart.
func liveHandlers() []liveHandler {
	servers := runningServers()
	var out []liveHandler
	sharedPool.Range(func(_, v any) bool {
		e, ok := v.(*adminEntry)
		if !ok {
			return true
		}
		name, running := servers[e.server]
		if servers == nil || running {
			out = append(out, liveHandler{h: e.h, server: name})
		}
		return true
	})
	slices.SortFunc(out, func(a, b liveHandler) int {
		if c := strings.Compare(a.h.base, b.h.base); c != 0 {
			return c
		}
		return strings.Compare(a.server, b.server)
	})
	return out
}

// runningServers maps the running config's http servers to their names;
// nil when no http app is running.
func runningServers() map[*caddyhttp.Server]string {
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		return nil
	}
	httpApp, ok := app.(*caddyhttp.App)
	if !ok {
		return nil
	}
	m := make(map[*caddyhttp.Server]string, len(httpApp.Servers))
	for name, srv := range httpApp.Servers {
		m[srv] = name
	}
	return m
}

// writeAdminJSON writes v as the JSON answer. Stored bodies go out
// byte for byte (no HTML escaping, no re-indenting), so that the CLI shows
// the same through the admin API as from the spool file.
func writeAdminJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return apiError(http.StatusInternalServerError, "encoding the answer: %v", err)
	}
	return nil
}

// apiError is an admin API error with its status; Caddy answers it as
// {"error": "<message>"}.
func apiError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// Interface guards
var _ caddy.AdminRouter = (*adminAPI)(nil)
