package caddyhook

import (
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// reasonConsoleHost answers a request to an insecure_no_auth console whose
// Host is not one of the site's names.
const reasonConsoleHost = "the hooks console with insecure_no_auth answers only its site's names: give the site a name " +
	"(a site address or host matcher) or open it as http://127.0.0.1:<port>/ or http://localhost:<port>/ " +
	"(a page on another name could reach it through DNS rebinding)"

// consoleHosts decides which Host names an insecure_no_auth console
// answers, against DNS rebinding: a page on the attacker's name, whose
// name then resolves to the console's address, is same-origin with the
// console for the browser, and its requests carry the attacker's name as
// Host (and as Origin). Such a console answers a request only when
// Caddy's host matchers bound it to the site's names (every route that
// leads to the console has a host matcher of concrete names: Caddy
// already refused every other Host), or when its Host is an IP address
// or localhost, which no DNS answer can stand for. The routes are read
// once, at the first request, when the server has provisioned them all.
type consoleHosts struct {
	server *caddyhttp.Server
	self   caddyhttp.MiddlewareHandler
	once   sync.Once
	bound  bool
}

// allows reports whether the console answers a request for host (the
// request's Host).
func (c *consoleHosts) allows(host string) bool {
	c.once.Do(func() {
		if c.server != nil {
			c.bound = serverBound(c.server, c.self) == boundAll
		}
	})
	return c.bound || literalHost(host)
}

// literalHost reports whether host (with or without a port) is an IP
// address, localhost or a name under .localhost: names a browser never
// asks DNS for.
func literalHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// What the walk found of the handler.
const (
	boundNotFound = iota // not in these routes
	boundAll             // found, and every way to it has a host matcher
	boundNot             // found on a way without one
)

// serverBound looks for target in the server's routes and error routes.
func serverBound(srv *caddyhttp.Server, target caddyhttp.MiddlewareHandler) int {
	w := routeWalk{srv: srv, target: target}
	w.routes(srv.Routes, false, 0)
	if srv.Errors != nil {
		w.routes(srv.Errors.Routes, false, 0)
	}
	return w.found
}

// routeWalk looks for a handler in a server's routes.
type routeWalk struct {
	srv    *caddyhttp.Server
	target caddyhttp.MiddlewareHandler
	found  int
}

// maxRouteDepth bounds the walk through subroutes and named routes (a
// named route may invoke itself).
const maxRouteDepth = 32

// routes walks routes and the subroutes, their error routes and the named
// routes they invoke; bound says whether the routes above them already
// matched the Host against concrete names.
func (w *routeWalk) routes(routes caddyhttp.RouteList, bound bool, depth int) {
	if depth > maxRouteDepth {
		w.saw(false) // too deep to tell: as if unbound
		return
	}
	for i := range routes {
		rb := bound || hostMatched(routes[i].MatcherSets)
		for _, h := range routes[i].Handlers {
			switch h := h.(type) {
			case *caddyhttp.Subroute:
				w.routes(h.Routes, rb, depth+1)
				if h.Errors != nil {
					w.routes(h.Errors.Routes, rb, depth+1)
				}
			case *caddyhttp.Invoke:
				if r := w.srv.NamedRoutes[h.Name]; r != nil {
					w.routes(caddyhttp.RouteList{*r}, rb, depth+1)
				}
			default:
				if h == w.target {
					w.saw(rb)
				}
			}
		}
	}
}

// saw records one way to the handler.
func (w *routeWalk) saw(bound bool) {
	switch {
	case !bound:
		w.found = boundNot
	case w.found == boundNotFound:
		w.found = boundAll
	}
}

// hostMatched reports whether every matcher set requires a Host among
// concrete names (no placeholder, not only wildcard labels).
func hostMatched(sets caddyhttp.MatcherSets) bool {
	if len(sets) == 0 {
		return false
	}
	for _, set := range sets {
		named := false
		for _, m := range set {
			if mh, ok := m.(*caddyhttp.MatchHost); ok && concreteHosts(*mh) {
				named = true
			}
		}
		if !named {
			return false
		}
	}
	return true
}

// concreteHosts reports whether every host of a host matcher names a
// site: no placeholder, and a label that is not a wildcard.
func concreteHosts(hosts []string) bool {
	if len(hosts) == 0 {
		return false
	}
	for _, h := range hosts {
		if strings.Contains(h, "{") || strings.Trim(h, "*.") == "" {
			return false
		}
	}
	return true
}
