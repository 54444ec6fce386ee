package caddyhook

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyhook/caddyhook/internal/version"
)

// adminRoute is one route of the admin API: a method and a path below
// /hooks/, and what it does for the selected handler.
type adminRoute struct {
	method string
	// path below /hooks/: literal segments, {name} for one segment, and
	// a last {name...} for the rest of the path (slashes included, as an
	// IPv6 prefix has); what {name} matched is serve's arg. A path ending
	// in / also matches itself without the slash and everything below it
	// (the console's page and files).
	path  string
	serve func(w http.ResponseWriter, r *http.Request, lh *liveHandler, arg string) error
	arg   string // serve's arg when path has no {name}
	scope routeScope
}

// routeScope says which handlers a route is for, and where it is served.
type routeScope uint8

const (
	oneHandler  routeScope = iota // the handler ?path= (and ?server=) selects, or the only one
	allHandlers                   // no selection: every handler, or none
	adminOnly                     // the console page: on the admin endpoint only, not below a hooks_console's api/
)

// adminRoutes is the admin API, in the order the routes are tried (a
// literal segment before a {name} that would match it too). It is the one
// list: the dispatcher reads it, docs/operations.md's tables are checked
// against it (TestAdminRoutesDocumented), and the console's api/ serves
// all but the adminOnly ones.
var adminRoutes = []adminRoute{
	{method: http.MethodGet, path: "", serve: serveStatus, scope: allHandlers},                 // each handler: base path, spool, lockouts, settings, cluster, events
	{method: http.MethodGet, path: "version", serve: serveVersion, scope: allHandlers},         // the running build: version, cluster level, admin API version, formats
	{method: http.MethodGet, path: "lockouts", serve: serveLockouts},                           // [{"address", "until"}]
	{method: http.MethodDelete, path: "lockouts/{address...}", serve: serveLift},               // lifts one lockout (404 if not locked)
	{method: http.MethodGet, path: "spool/dead", serve: serveDeadLetters},                      // the dead letters (?body=1: with the stored gateway request)
	{method: http.MethodPost, path: "spool/dead/retry", serve: serveRetryDrop, arg: "retried"}, // {"ids": [...]} or {"all": true} → {"retried": N}
	{method: http.MethodPost, path: "spool/dead/drop", serve: serveRetryDrop, arg: "dropped"},  // {"ids": [...]} or {"all": true} → {"dropped": N}
	{method: http.MethodPost, path: "spool/pause", serve: servePause, arg: "pause"},            // delivery stops; accepting continues
	{method: http.MethodPost, path: "spool/resume", serve: servePause, arg: "resume"},          // delivery continues where it stopped
	{method: http.MethodGet, path: "spool/delivery", serve: serveDelivery},                     // the queue, each delivery node's health, whether delivery runs
	{method: http.MethodGet, path: "events", serve: serveEventList},                            // the event log, newest first (eventlog_admin.go)
	{method: http.MethodGet, path: "events/stream", serve: serveEventStream},                   // the live tail (Server-Sent Events)
	{method: http.MethodGet, path: "events/rates", serve: serveEventRates},                     // the last hour's rates
	{method: http.MethodGet, path: "events/{id}", serve: serveEventDetail},                     // one event
	{method: http.MethodPost, path: "events/{id}/replay", serve: serveReplay},                  // dispatches it again
	{method: http.MethodGet, path: "console/", serve: serveConsoleOnAdmin, scope: adminOnly},   // the console page and its files (console_page.go)
}

// match reports whether sub (the path below /hooks/) is the route's path,
// and what its {name} matched.
func (rt adminRoute) match(sub string) (string, bool) {
	if dir, ok := strings.CutSuffix(rt.path, "/"); ok {
		if sub == dir {
			return "", true
		}
		rest, ok := strings.CutPrefix(sub, rt.path)
		return rest, ok
	}
	arg := rt.arg
	pat := strings.Split(rt.path, "/")
	got := strings.Split(sub, "/")
	for i, seg := range pat {
		name, isVar := strings.CutPrefix(seg, "{")
		switch {
		case isVar && strings.HasSuffix(name, "...}") && i == len(pat)-1:
			if i >= len(got) {
				return "", false
			}
			return strings.Join(got[i:], "/"), true
		case i >= len(got):
			return "", false
		case isVar:
			if got[i] == "" {
				return "", false
			}
			arg = got[i]
		case seg != got[i]:
			return "", false
		}
	}
	return arg, len(got) == len(pat)
}

// dispatchAdmin answers the admin request for sub (the path below
// /hooks/): the first route whose path and method match. A path no route
// has is a 404; a path with routes for other methods a 405 naming them.
// onAdmin: on the admin endpoint (else below a hooks_console's api/).
func dispatchAdmin(w http.ResponseWriter, r *http.Request, sub string, onAdmin bool) error {
	w.Header().Set(version.APIHeader, strconv.Itoa(version.API))
	var allow []string
	for _, rt := range adminRoutes {
		arg, ok := rt.match(sub)
		if !ok || (rt.scope == adminOnly && !onAdmin) {
			continue
		}
		if r.Method != rt.method && rt.scope != adminOnly { // the console checks its own methods (GET, HEAD)
			if !slices.Contains(allow, rt.method) {
				allow = append(allow, rt.method)
			}
			continue
		}
		if rt.scope != oneHandler {
			return rt.serve(w, r, nil, arg)
		}
		lh, err := selectHandler(r)
		if err != nil {
			return err
		}
		return rt.serve(w, r, lh, arg)
	}
	if len(allow) == 0 {
		return apiError(http.StatusNotFound, "no such hooks admin endpoint: %s", r.URL.Path)
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return apiError(http.StatusMethodNotAllowed, "%s %s: method not allowed (use %s)", r.Method, r.URL.Path, strings.Join(allow, " or "))
}

// serveConsoleOnAdmin serves the console's page and files on the admin
// endpoint.
func serveConsoleOnAdmin(w http.ResponseWriter, r *http.Request, _ *liveHandler, asset string) error {
	return serveConsole(w, r, consoleOnAdmin, asset)
}
