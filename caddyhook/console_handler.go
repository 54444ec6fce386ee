package caddyhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(new(Console))
	httpcaddyfile.RegisterHandlerDirective("hooks_console", parseConsoleCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("hooks_console", httpcaddyfile.Before, "respond")
}

// Console is the `hooks_console` handler: the hooks console (the page and
// its API, the admin API's routes below api/) on a site, for operators
// that Caddy's own authentication lets in: basic_auth (or any handler
// that sets {http.auth.user.id}), or forward_auth with UserHeader. A
// request with no authenticated user is answered 403, unless
// InsecureNoAuth is set; such a console answers only the site's names
// (console_host.go: on a site without a host matcher only an IP address
// or localhost), against DNS rebinding. State-changing requests must
// carry the page's same-origin token (X-Hooks-Csrf, tied to the user)
// and, when the browser sends them, a same-origin Origin and
// Sec-Fetch-Site.
type Console struct {
	// InsecureNoAuth serves the console without authentication: only for
	// a site nothing but the operator can reach. It then answers only the
	// site's names: on a site without a host matcher (e.g. :2020), only
	// requests for an IP address or localhost (http://127.0.0.1:2020/),
	// so that a page on another name cannot reach it by DNS rebinding.
	InsecureNoAuth bool `json:"insecure_no_auth,omitempty"`
	// UserHeader names the header that carries the user behind
	// forward_auth, which sets no {http.auth.user.id}: the header of the
	// auth service's answer that forward_auth's copy_headers copies (the
	// name before > when copy_headers renames it), e.g. Remote-User. It
	// is read from that answer ({http.reverse_proxy.header.<name>}),
	// never from the request, which the client writes: a request that
	// did not pass forward_auth, or whose auth answer had no such header,
	// is answered 403.
	UserHeader string `json:"user_header,omitempty"`

	secret *consoleSecret
	hosts  consoleHosts // the names an insecure_no_auth console answers (console_host.go)
	// userKey is the placeholder of UserHeader in the auth answer.
	userKey string
	stop    context.Context // ends the live tails when the server shuts down
	cancel  context.CancelFunc
	held    poolHold
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (*Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.hooks_console", New: func() caddy.Module { return new(Console) }}
}

// consoleSecret keys the CSRF tokens; it lives in the usage pool so that
// a page opened before a reload keeps working after it.
type consoleSecret struct{ key []byte }

// Destruct implements caddy.Destructor.
func (*consoleSecret) Destruct() error { return nil }

// Provision takes the CSRF secret and ends the live tails when the server
// shuts down (a stream would otherwise hold a graceful shutdown open).
func (c *Console) Provision(ctx caddy.Context) error {
	c.logger = ctx.Logger()
	if c.UserHeader != "" {
		if !validHeaderName(c.UserHeader) {
			return fmt.Errorf("user_header: %q is not a header name", c.UserHeader)
		}
		c.userKey = "http.reverse_proxy.header." + http.CanonicalHeaderKey(c.UserHeader)
	}
	secret, _, err := hold(&c.held, consoleSecretKey, func() (*consoleSecret, error) {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		return &consoleSecret{key: k}, nil
	})
	if err != nil {
		return err
	}
	c.secret = secret
	c.stop, c.cancel = context.WithCancel(context.Background())
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		srv.RegisterOnShutdown(c.cancel)
		c.hosts.server = srv
	}
	c.hosts.self = c
	return nil
}

// Cleanup ends the live tails and gives back the secret.
func (c *Console) Cleanup() error {
	if c.cancel != nil {
		c.cancel()
	}
	c.held.release()
	return nil
}

// csrfToken is the token of user's pages.
func (c *Console) csrfToken(user string) string {
	m := hmac.New(sha256.New, c.secret.key)
	m.Write([]byte("hooks_console csrf\x00" + user))
	return hex.EncodeToString(m.Sum(nil))
}

// ServeHTTP serves the console below wherever the handler is mounted:
// .../api/<route> is the admin API's <route>, other paths the page and
// its files.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	user := c.user(r)
	switch {
	case user == "" && c.UserHeader != "" && !c.InsecureNoAuth:
		return writeConsoleError(w, apiError(http.StatusForbidden,
			"the hooks console needs an authenticated user: forward_auth's answer carried no %s (user_header; copy_headers %s in forward_auth before hooks_console)",
			http.CanonicalHeaderKey(c.UserHeader), http.CanonicalHeaderKey(c.UserHeader)))
	case user == "" && !c.InsecureNoAuth:
		return writeConsoleError(w, apiError(http.StatusForbidden,
			"the hooks console needs an authenticated user: put basic_auth, or forward_auth with user_header, before hooks_console"))
	case user == "" && !c.hosts.allows(r.Host):
		return writeConsoleError(w, apiError(http.StatusForbidden, reasonConsoleHost))
	}
	p := r.URL.Path
	if _, after, ok := strings.Cut(p, "/api/"); ok {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := c.checkCSRF(r, user); err != nil {
				return writeConsoleError(w, err)
			}
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(c.stop, cancel)()
		return writeConsoleError(w, serveAPI(w, withOperator(r.WithContext(ctx), user), after))
	}
	asset := ""
	if !strings.HasSuffix(p, "/") {
		asset = path.Base(p)
		if _, ok := consoleAssets[asset]; !ok {
			asset = "" // the page itself, without its trailing slash
		}
	}
	return writeConsoleError(w, serveConsole(w, r, consoleMount{api: "api/", csrf: c.csrfToken(user)}, asset))
}

// user is the authenticated user of r: {http.auth.user.id}, set by
// Caddy's authentication handlers (basic_auth, …), else with user_header
// the named header of forward_auth's 2xx answer, which Caddy keeps as
// {http.reverse_proxy.header.<name>} while the handlers after
// forward_auth run (a client cannot set it; the request header of that
// name is not read); "" when neither.
func (c *Console) user(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	if user := repl.ReplaceAll("{http.auth.user.id}", ""); user != "" {
		return user
	}
	if c.userKey == "" {
		return ""
	}
	v, _ := repl.GetString(c.userKey)
	return strings.TrimSpace(v)
}

// checkCSRF refuses a state-changing request that does not carry the
// user's token, or that the browser says comes from another origin.
func (c *Console) checkCSRF(r *http.Request, user string) error {
	got := r.Header.Get("X-Hooks-Csrf")
	if !hmac.Equal([]byte(got), []byte(c.csrfToken(user))) {
		return apiError(http.StatusForbidden, "missing or wrong X-Hooks-Csrf token (reload the console)")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return apiError(http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return apiError(http.StatusForbidden, "cross-origin request refused (Origin: %s)", o)
		}
	}
	return nil
}

// writeConsoleError writes an API error as the admin endpoint would:
// {"error": "…"} with its status. Other errors are returned to Caddy.
func writeConsoleError(w http.ResponseWriter, err error) error {
	var ae caddy.APIError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	msg := ae.Message
	if msg == "" && ae.Err != nil {
		msg = ae.Err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ae.HTTPStatus)
	return json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// parseConsoleCaddyfile sets up the handler from Caddyfile tokens:
//
//	hooks_console [<matcher>] {
//	    insecure_no_auth
//	    user_header <header>   # behind forward_auth: its copy_headers user header
//	}
func parseConsoleCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Console)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile reads the hooks_console directive.
func (c *Console) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "insecure_no_auth":
			if d.NextArg() {
				return d.ArgErr()
			}
			c.InsecureNoAuth = true
		case "user_header":
			if !d.NextArg() {
				return d.ArgErr()
			}
			c.UserHeader = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized hooks_console subdirective '%s'", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Console)(nil)
	_ caddy.CleanerUpper          = (*Console)(nil)
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddyfile.Unmarshaler       = (*Console)(nil)
)
