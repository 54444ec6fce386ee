package caddyhook

import (
	"context"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/internal/adminapi"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// adminAPI is the `admin.api.hooks` module: routes under /hooks/ on Caddy's
// admin endpoint (so its access control applies: localhost or a Unix
// socket by default, mTLS for remote admin) to look at and operate the
// running hooks handlers. The routes are adminRoutes (admin_routes.go),
// the one list the dispatcher reads and docs/operations.md is checked
// against. With several hooks handlers, ?path=<base path> (and
// ?server=<name> when two servers use the same base path) selects one. No
// answer carries a token or secret. Every answer carries the admin API's
// version in the Hooks-Api-Version header (internal/version.API).
type adminAPI struct {
	ctx caddy.Context // its config's: ends the live tails when it is replaced (life)
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

// serve dispatches an admin request: the console's page and files, or an
// API route.
func (a *adminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	sub := strings.TrimPrefix(r.URL.Path, adminapi.Prefix)
	if life := a.life(); life != nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(life, cancel)()
		r = r.WithContext(ctx)
	}
	return dispatchAdmin(w, r, sub, true)
}

// life is the context whose end ends a request (a live tail): the
// config's this admin server belongs to, or, once that one has ended, the
// config's in force. Caddy replaces the admin server before it provisions
// a new config's apps and keeps the new one when the config is refused:
// that admin server's config ended at once (and every request on it was
// cancelled: a live tail after a refused reload ended as it began), while
// the config in force goes on until a load replaces it.
func (a *adminAPI) life() context.Context {
	if a.ctx.Context == nil || a.ctx.Err() == nil {
		return a.ctx.Context
	}
	if cur := caddy.ActiveContext(); cur.Context != nil {
		return cur
	}
	return a.ctx
}

// serveAPI answers the API request sub (the path below /hooks/) below a
// hooks_console handler's api/ path: the routes of the admin endpoint but
// the console page.
func serveAPI(w http.ResponseWriter, r *http.Request, sub string) error {
	return dispatchAdmin(w, r, sub, false)
}

// Interface guards
var _ caddy.AdminRouter = (*adminAPI)(nil)
