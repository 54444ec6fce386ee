package caddyhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminPrefix is where the routes live on Caddy's admin endpoint.
const adminPrefix = "/hooks/"

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
// token or secret.
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
	return []caddy.AdminRoute{{Pattern: adminPrefix, Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// adminRoute is one endpoint: its method and what it does for the
// selected handler (nil handler: the endpoint lists every handler).
type adminRoute struct {
	method string
	serve  func(w http.ResponseWriter, r *http.Request, lh *liveHandler, arg string) error
}

// serve dispatches an admin request by path and method.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	sub := strings.TrimPrefix(r.URL.Path, adminPrefix)
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
	var rt adminRoute
	var arg string
	switch {
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
	if sub == "" {
		return rt.serve(w, r, nil, arg)
	}
	lh, err := selectHandler(r)
	if err != nil {
		return err
	}
	return rt.serve(w, r, lh, arg)
}

// handlerStatus is one handler in GET /hooks/.
type handlerStatus struct {
	Path               string        `json:"path"`
	Server             string        `json:"server,omitempty"`
	ActiveLockouts     int           `json:"active_lockouts"`
	IdempotencyEntries int           `json:"idempotency_entries"`
	Spool              *spoolSummary `json:"spool"`
	// Settings are limits in force that no request shows directly,
	// read from the state that enforces them (kept across reloads).
	Settings handlerSettings `json:"settings"`
	// Cluster is the cluster engine in use (null without one).
	Cluster *clusterSummary `json:"cluster,omitempty"`
	// Events is the event log's settings in force (absent with events off).
	Events *eventsSummary `json:"events,omitempty"`
}

// eventsSummary is a handler's event log settings in force: what it
// records, and the bounds of the log (the oldest config's during a
// reload, as they apply).
type eventsSummary struct {
	Bodies        bool     `json:"bodies"`
	MaxBody       int      `json:"max_body"`
	MaxEvents     int      `json:"max_events"`
	MaxBytes      int64    `json:"max_bytes"`
	RetainSeconds float64  `json:"retain_seconds"`
	MaxRejections int      `json:"max_rejections"`
	Dir           string   `json:"dir,omitempty"`
	Headers       []string `json:"headers,omitempty"` // recorded besides the default ones
}

// eventsStatus summarises h's event log (nil with events off).
func eventsStatus(h *Handler) *eventsSummary {
	rec := h.evrec
	if rec == nil {
		return nil
	}
	b := rec.log.Bounds()
	es := &eventsSummary{Bodies: rec.bodies, MaxBody: rec.maxBody, MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes,
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

// handlerSettings are a handler's limits in force.
type handlerSettings struct {
	UnauthenticatedBodies        int     `json:"unauthenticated_bodies"`
	UnauthenticatedTimeoutSecond float64 `json:"unauthenticated_body_timeout_seconds"`
	UnauthenticatedPerAddress    int     `json:"unauthenticated_bodies_per_address"`
	LockoutTableSize             int     `json:"lockout_table_size"`
	IdempotencyTTLSeconds        float64 `json:"idempotency_ttl_seconds"`
}

// clusterSummary is the cluster engine of a handler in GET /hooks/: its
// namespace, whether it is reachable, and the settings of the connection
// in use (no secret: a secret shows as its placeholder).
type clusterSummary struct {
	Name     string            `json:"name"`
	Up       bool              `json:"up"`
	Settings map[string]string `json:"settings,omitempty"`
}

// spoolSummary is a spool's state in GET /hooks/.
type spoolSummary struct {
	Dir              string  `json:"dir,omitempty"`
	Depth            int     `json:"depth"`
	InFlight         int     `json:"in_flight"`
	Bytes            int64   `json:"bytes"`
	MaxBytes         int64   `json:"max_bytes"`
	DeadLetters      int     `json:"dead_letters"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	Paused           bool    `json:"paused"`
	// Delivering: this node delivers to the gateway (with spool cluster,
	// deliver on; a local spool delivers from the config that opened it)
	Delivering bool   `json:"delivering"`
	Rate       string `json:"rate,omitempty"`
	// Error says why the counters are missing (e.g. the cluster queue is
	// unreachable); the rest of the summary is what this node knows.
	Error string `json:"error,omitempty"`
	// the settings in force, which a reload changes
	MaxAgeSeconds       float64 `json:"max_age_seconds"`
	RetryInitialSeconds float64 `json:"retry_initial_seconds"`
	RetryMaxSeconds     float64 `json:"retry_max_seconds"`
	Workers             int     `json:"workers"`
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
	out := make([]handlerStatus, 0, len(all))
	now := time.Now()
	for _, lh := range all {
		st := handlerStatus{Path: lh.h.base, Server: lh.server,
			ActiveLockouts: lh.h.lockout.Active(now), IdempotencyEntries: lh.h.idem.entries(),
			Settings: handlerSettings{UnauthenticatedBodies: cap(lh.h.unauth.slots), UnauthenticatedTimeoutSecond: lh.h.unauth.timeout.Seconds(),
				UnauthenticatedPerAddress: int(lh.h.unauth.perAddr.max),
				LockoutTableSize:          lh.h.lockout.capacity(), IdempotencyTTLSeconds: lh.h.idem.ttl.Seconds()}}
		st.Events = eventsStatus(lh.h)
		if cs := lh.h.cluster; cs != nil {
			st.Cluster = &clusterSummary{Name: cs.name, Up: cs.backend.Up()}
			if d, ok := cs.backend.(cluster.Describer); ok {
				st.Cluster.Settings = d.Settings()
			}
		}
		if lh.h.spoolOps != nil {
			// a spool whose counters cannot be read (the cluster queue
			// while NATS is down) is reported with its error; the other
			// handlers and this one's local state are still answered
			s, err := lh.h.spoolOps.Status()
			st.Spool = &spoolSummary{Dir: lh.h.spoolDir, Depth: s.Depth, InFlight: s.InFlight, Bytes: s.Bytes,
				MaxBytes: s.MaxBytes, DeadLetters: s.Dead, OldestAgeSeconds: s.OldestAge.Seconds(),
				Paused: s.Paused, Delivering: s.Delivering, Rate: s.Rate.String(), MaxAgeSeconds: s.MaxAge.Seconds(),
				RetryInitialSeconds: s.RetryInitial.Seconds(), RetryMaxSeconds: s.RetryMax.Seconds(), Workers: s.Workers}
			if err != nil {
				st.Spool.Error = err.Error()
			}
		}
		out = append(out, st)
	}
	return writeAdminJSON(w, out)
}

// lockoutJSON is one entry of GET /hooks/lockouts.
type lockoutJSON struct {
	Address string    `json:"address"`
	Until   time.Time `json:"until"`
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
	slices.SortFunc(locks, func(a, b lockedAddr) int {
		if c := a.until.Compare(b.until); c != 0 {
			return c
		}
		return strings.Compare(a.addr, b.addr)
	})
	out := make([]lockoutJSON, len(locks))
	for i, l := range locks {
		out[i] = lockoutJSON{Address: l.addr, Until: l.until.UTC()}
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

// deadLetterJSON is one entry of GET /hooks/spool/dead.
type deadLetterJSON struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Path        string    `json:"path"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	FirstSeen   time.Time `json:"first_seen"`
	BodyBytes   int       `json:"body_bytes"`
	ClientIP    string    `json:"client_ip,omitempty"`
	TraceParent string    `json:"traceparent,omitempty"`
	// Body is the stored gateway request body (with ?body=1) when it is
	// compact JSON, which it is unless forwarded byte for byte; BodyText
	// holds any other body, so either way the bytes are exact.
	Body     json.RawMessage `json:"body,omitempty"`
	BodyText string          `json:"body_text,omitempty"`
}

// serveDeadLetters lists the dead letters in acceptance order.
func serveDeadLetters(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	dead, err := ops.DeadLetters()
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.h.base, err)
	}
	withBody := r.URL.Query().Get("body")
	out := make([]deadLetterJSON, len(dead))
	for i, ev := range dead {
		out[i] = deadLetterJSON{ID: ev.ID, Kind: ev.Kind, Path: ev.Path, Reason: ev.LastError, Attempts: ev.Attempts,
			FirstSeen: ev.FirstSeen.UTC(), BodyBytes: len(ev.Body), ClientIP: ev.ClientIP, TraceParent: ev.TraceParent}
		if withBody != "" && withBody != "0" && withBody != "false" {
			out[i].Body, out[i].BodyText = bodyJSON(ev.Body)
		}
	}
	return writeAdminJSON(w, out)
}

// bodyJSON returns a stored body for a JSON answer: as JSON when the
// encoder would send it unchanged (compact JSON), else as text.
func bodyJSON(b []byte) (json.RawMessage, string) {
	var compact bytes.Buffer
	if len(b) > 0 && json.Compact(&compact, b) == nil && bytes.Equal(compact.Bytes(), b) {
		return b, ""
	}
	return nil, string(b)
}

// deadSelection is the body of a retry or drop request.
type deadSelection struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

// serveRetryDrop answers POST /hooks/spool/dead/retry and /drop (verb is
// "retried" or "dropped").
func serveRetryDrop(w http.ResponseWriter, r *http.Request, lh *liveHandler, verb string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	var sel deadSelection
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sel); err != nil {
		return apiError(http.StatusBadRequest, `want {"ids": ["<event id>", ...]} or {"all": true}: %v`, err)
	}
	switch {
	case sel.All && len(sel.IDs) > 0:
		return apiError(http.StatusBadRequest, `give "ids" or "all", not both`)
	case !sel.All && len(sel.IDs) == 0:
		return apiError(http.StatusBadRequest, `give the event "ids", or "all": true`)
	}
	op, state := ops.Retry, eventlog.StateQueued
	if verb == "dropped" {
		op, state = ops.Drop, eventlog.StateDropped
	}
	ids := sel.IDs
	if sel.All && lh.h.evrec != nil {
		if dead, err := ops.DeadLetters(); err == nil {
			for _, ev := range dead {
				ids = append(ids, ev.ID)
			}
		}
	}
	n, err := op(sel.IDs...) // no ids (all: true) = every dead letter
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.h.base, err)
	}
	lh.h.recordOperator(ids, state)
	lh.h.logger.Info("dead letters "+verb+" through the admin API", zap.Int("count", n), zap.Bool("all", sel.All))
	return writeAdminJSON(w, map[string]int{verb: n})
}

// servePause answers POST /hooks/spool/pause and /resume.
func servePause(w http.ResponseWriter, _ *http.Request, lh *liveHandler, what string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	pause := what == "pause"
	if pause {
		err = ops.Pause()
	} else {
		err = ops.Resume()
	}
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.h.base, err)
	}
	return writeAdminJSON(w, map[string]bool{"paused": pause})
}

// liveHandler is a hooks handler of the running config.
type liveHandler struct {
	h      *Handler
	server string // the http server (site listener) it belongs to
}

// spool returns the handler's spool, or a 404 when it has none.
func (lh *liveHandler) spool() (spool.Ops, error) {
	if lh.h.spoolOps == nil {
		return nil, apiError(http.StatusNotFound, "the hooks handler at %s has no spool", lh.h.base)
	}
	return lh.h.spoolOps, nil
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
	key := fmt.Sprintf("hooks.admin|%p", h)
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	sharedPool.LoadOrStore(key, &adminEntry{h: h, server: srv})
	h.poolKeys = append(h.poolKeys, key)
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
