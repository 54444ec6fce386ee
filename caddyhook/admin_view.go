package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// What the admin API's routes (admin.go, admin_spool.go,
// eventlog_admin.go) share: the handlers they see, how a request selects
// one, and how they answer.

// maxAdminBody bounds a request body of the admin API (a retry/drop
// request).
const maxAdminBody = 1 << 20

// liveHandler is a hooks handler of the running config.
type liveHandler struct {
	view   *adminView
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
		if (path == "" || lh.view.base == path) && (server == "" || lh.server == server) {
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
		names[i] = "path=" + lh.view.base
		if lh.server != "" {
			names[i] += " server=" + lh.server
		}
	}
	return strings.Join(names, ", ")
}

// adminView is what the admin API sees of a provisioned handler: its
// base path and the concerns its routes read and operate. The handler
// registers it from Provision to Cleanup (registerAdmin).
type adminView struct {
	base     string
	server   *caddyhttp.Server // the server whose routes hold the handler (nil outside the http app)
	lockout  *lockoutGuard
	idem     *idempotencyCheck
	bodies   *bodyReads
	cluster  *clusterState // nil without a cluster engine
	spool    spool.Ops     // nil without a spool
	spoolDir string        // its directory, or cluster:<namespace>
	events   *eventRecorder
	outcomes *outcomeRelay
	sink     sink         // where a replay goes
	view     *clusterView // the cluster-wide view
	logger   *zap.Logger
}

// Destruct implements caddy.Destructor; the handler cleans up itself.
func (*adminView) Destruct() error { return nil }

// registerAdmin makes v visible to the admin API until held is released.
func registerAdmin(held *poolHold, v *adminView) {
	_, _, _ = hold(held, fmt.Sprintf(adminPoolPrefix+"%p", v), func() (*adminView, error) { return v, nil })
}

// liveHandlers returns the registered handlers of the running config,
// ordered by base path and server. During a reload the new config's
// handlers are registered before they serve and the old ones until their
// Cleanup; the running config's http servers tell them apart.
func liveHandlers() []liveHandler {
	servers := runningServers()
	var out []liveHandler
	sharedPool.Range(func(_, v any) bool {
		view, ok := v.(*adminView)
		if !ok {
			return true
		}
		name, running := servers[view.server]
		if servers == nil || running {
			out = append(out, liveHandler{view: view, server: name})
		}
		return true
	})
	slices.SortFunc(out, func(a, b liveHandler) int {
		if c := strings.Compare(a.view.base, b.view.base); c != 0 {
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

// operatorKey carries the operator of an admin request made through a
// hooks_console handler: the user Caddy's authentication gave it
// ({http.auth.user.id}; "" with insecure_no_auth).
type operatorKey struct{}

// consoleOperator is the operator of a console request.
type consoleOperator struct{ user string }

// withOperator is r, a console request of user, carrying its operator.
func withOperator(r *http.Request, user string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), operatorKey{}, consoleOperator{user}))
}

// adminEndpointOperator names the operator of a request to Caddy's admin
// endpoint, which authenticates no user (its own access control let it
// in: a local socket, mTLS for remote admin).
const adminEndpointOperator = "admin API"

// operatorOf is who made an admin request: the console's authenticated
// user (as one line), or the admin endpoint.
func operatorOf(r *http.Request) string {
	op, ok := r.Context().Value(operatorKey{}).(consoleOperator)
	switch {
	case !ok:
		return adminEndpointOperator
	case op.user == "":
		return "console without authentication (insecure_no_auth)"
	}
	return "user " + safetext.Line(op.user)
}

// scope reads ?scope=: cluster (true) or this node (false, the default).
func scope(r *http.Request) (bool, error) {
	switch s := r.URL.Query().Get("scope"); s {
	case "", "node":
		return false, nil
	case adminapi.ScopeCluster:
		return true, nil
	default:
		return false, apiError(http.StatusBadRequest, "scope: want cluster (every node) or node (this one); got %q", safetext.Line(s))
	}
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
