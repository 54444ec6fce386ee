package caddyhook

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Refusals of checkClientAddressSource: the lockout is keyed on the client
// address, so a server whose client address the client can choose, or that
// has none, would make the lockout either useless or a way to lock out
// everyone.
var (
	errLeftmostForwarded = errors.New("hooks: the server trusts proxies (trusted_proxies or trusted_proxies_unix) " +
		"without trusted_proxies_strict: Caddy then takes the client address from the leftmost X-Forwarded-For entry, " +
		"which the client itself writes, so a client could choose its own lockout key or lock out someone else's address; " +
		"add trusted_proxies_strict to the server's options (the address is then the rightmost one no trusted proxy added)")
	errUnixNoProxy = errors.New("hooks: the server listens on a Unix socket without trusted_proxies_unix: such connections " +
		"have no client address, so every client would share one lockout key and one client's failures would lock out all; " +
		"set trusted_proxies_unix and trusted_proxies_strict in the server's options and have the proxy in front of the " +
		"socket send X-Forwarded-For (or use the proxy_protocol listener wrapper)")
)

// reasonLeftmostForwarded answers a request whose client address a
// non-strict trusted proxy setting let the client choose (only when the
// setting could not be seen at provision).
const reasonLeftmostForwarded = "server misconfigured: trusted_proxies without trusted_proxies_strict"

// clientAddressCheck is what provision learnt about the server's client
// addresses; leftmostUnknown asks for the request-time check.
type clientAddressCheck struct {
	server          *caddyhttp.Server
	leftmostUnknown bool
}

// checkClientAddressSource refuses a server whose client addresses cannot
// key the lockout: one that trusts forwarded headers without strict mode,
// or one that listens on a Unix socket without taking the address from a
// trusted proxy. A handler provisioned outside a server (a dry run) is not
// checked.
func checkClientAddressSource(ctx caddy.Context) (clientAddressCheck, error) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		return clientAddressCheck{}, nil
	}
	return clientAddressProblem(srv)
}

// clientAddressProblem is checkClientAddressSource for a provisioned
// server. Caddy has loaded (and dropped the raw JSON of) trusted_proxies
// and the listener wrappers by the time handlers provision, so they are
// read from the loaded modules; should a Caddy version hide them, the
// trusted_proxies check moves to the request (leftmostUnknown).
func clientAddressProblem(srv *caddyhttp.Server) (clientAddressCheck, error) {
	c := clientAddressCheck{server: srv}
	trusts, known := serverTrustsProxies(srv)
	if srv.TrustedProxiesStrict <= 0 {
		switch {
		case trusts || srv.TrustedProxiesUnix:
			return c, errLeftmostForwarded
		case !known:
			c.leftmostUnknown = true
		}
	}
	if srv.TrustedProxiesUnix || serverHasWrapper(srv, "proxy_protocol") {
		return c, nil
	}
	for _, l := range srv.Listen {
		na, err := caddy.ParseNetworkAddress(l)
		if err == nil && na.IsUnixNetwork() {
			return c, fmt.Errorf("%w (listener %s)", errUnixNoProxy, l)
		}
	}
	return c, nil
}

// leftmost reports a request whose client address came from a trusted
// proxy's forwarded header read without strict mode (see
// clientAddressProblem); nil-safe, false unless the check is needed.
func (c clientAddressCheck) leftmost(r *http.Request) bool {
	if !c.leftmostUnknown || c.server.TrustedProxiesStrict > 0 {
		return false
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted
}

// serverTrustsProxies reports whether srv loaded a trusted_proxies source;
// known is false when this Caddy version does not show it.
func serverTrustsProxies(srv *caddyhttp.Server) (trusts, known bool) {
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	if !f.IsValid() || f.Kind() != reflect.Interface {
		return false, false
	}
	return !f.IsNil(), true
}

// serverHasWrapper reports whether srv loaded a listener wrapper of the
// named module (such as proxy_protocol, which gives every connection, Unix
// socket ones too, the address the proxy sends in the PROXY header).
func serverHasWrapper(srv *caddyhttp.Server, name string) bool {
	f := reflect.ValueOf(srv).Elem().FieldByName("listenerWrappers")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return false
	}
	for i := range f.Len() {
		e := f.Index(i)
		if e.Kind() == reflect.Interface && !e.IsNil() {
			t := e.Elem().Type()
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if strings.Contains(strings.ToLower(t.PkgPath()), strings.ReplaceAll(name, "_", "")) {
				return true
			}
		}
	}
	return false
}
