package caddyhook

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestAdminRouteMatch: which route and argument a path below /hooks/
// gets, and the 404 and 405 of the dispatcher.
func TestAdminRouteMatch(t *testing.T) {
	tests := []struct {
		method, sub string
		onAdmin     bool
		route, arg  string // the route's path; "" route with status: no route served
		status      int    // 404 or 405 when no route serves it
		allow       string
	}{
		{method: "GET", sub: "", route: "", arg: ""},
		{method: "GET", sub: "version", route: "version"},
		{method: "GET", sub: "lockouts", route: "lockouts"},
		{method: "DELETE", sub: "lockouts/10.0.0.1", route: "lockouts/{address...}", arg: "10.0.0.1"},
		{method: "DELETE", sub: "lockouts/2001:db8:1:2::/64", route: "lockouts/{address...}", arg: "2001:db8:1:2::/64"},
		{method: "POST", sub: "lockouts/10.0.0.1", status: 405, allow: "DELETE"},
		{method: "POST", sub: "spool/dead/retry", route: "spool/dead/retry", arg: "retried"},
		{method: "POST", sub: "spool/dead/drop", route: "spool/dead/drop", arg: "dropped"},
		{method: "POST", sub: "spool/pause", route: "spool/pause", arg: "pause"},
		{method: "POST", sub: "spool/resume", route: "spool/resume", arg: "resume"},
		{method: "GET", sub: "spool/pause", status: 405, allow: "POST"},
		{method: "POST", sub: "spool/dead", status: 405, allow: "GET"},
		{method: "GET", sub: "events", route: "events"},
		{method: "GET", sub: "events/stream", route: "events/stream"},
		{method: "GET", sub: "events/rates", route: "events/rates"},
		{method: "GET", sub: "events/abc", route: "events/{id}", arg: "abc"},
		{method: "POST", sub: "events/abc/replay", route: "events/{id}/replay", arg: "abc"},
		{method: "GET", sub: "events/abc/replay", status: 405, allow: "POST"},
		{method: "POST", sub: "events/stream", status: 405, allow: "GET"},
		{method: "GET", sub: "events/", status: 404},
		{method: "GET", sub: "events/a/b", status: 404},
		{method: "GET", sub: "events//replay", status: 404},
		{method: "GET", sub: "console", onAdmin: true, route: "console/", arg: ""},
		{method: "GET", sub: "console/", onAdmin: true, route: "console/", arg: ""},
		{method: "HEAD", sub: "console/console.js", onAdmin: true, route: "console/", arg: "console.js"},
		{method: "GET", sub: "console/", status: 404}, // below a hooks_console's api/
		{method: "GET", sub: "nothing", status: 404},
		{method: "GET", sub: "versions", status: 404},
		{method: "GET", sub: "lockouts/x/y", status: 405, allow: "DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.sub, func(t *testing.T) {
			var served *adminRoute
			var servedArg string
			orig := adminRoutes
			adminRoutes = slices.Clone(orig)
			defer func() { adminRoutes = orig }()
			for i := range adminRoutes {
				rt := &adminRoutes[i]
				if rt.scope == oneHandler {
					rt.scope = allHandlers // no handler to select in this test
				}
				rt.serve = func(_ http.ResponseWriter, _ *http.Request, _ *liveHandler, arg string) error {
					served, servedArg = &orig[i], arg
					return nil
				}
			}
			w := httptest.NewRecorder()
			r := httptest.NewRequest(tt.method, "/hooks/"+tt.sub, nil)
			err := dispatchAdmin(w, r, tt.sub, tt.onAdmin)
			if tt.status != 0 {
				var ae caddy.APIError
				if served != nil {
					t.Fatalf("served by %q, want %d", served.path, tt.status)
				}
				if !errors.As(err, &ae) || ae.HTTPStatus != tt.status {
					t.Fatalf("err %v, want a %d", err, tt.status)
				}
				if got := w.Header().Get("Allow"); got != tt.allow {
					t.Fatalf("Allow %q, want %q", got, tt.allow)
				}
				return
			}
			if err != nil || served == nil {
				t.Fatalf("err %v, served %v; want route %q", err, served, tt.route)
			}
			if served.path != tt.route || servedArg != tt.arg {
				t.Fatalf("served by %q with %q, want %q with %q", served.path, servedArg, tt.route, tt.arg)
			}
		})
	}
}

// docRoute matches a route in the first cell of a table row of the
// documentation: `GET /hooks/lockouts/<address>`, with its query left out.
var docRoute = regexp.MustCompile("^\\| `(GET|POST|PUT|PATCH|DELETE|HEAD) (/hooks/[^`?]*)[^`]*` \\|")

// routeDoc is how the documentation writes a route: its method and path,
// {name} written <name>.
func routeDoc(rt adminRoute) string {
	p := regexp.MustCompile(`\{([a-z]+)(\.\.\.)?\}`).ReplaceAllString(rt.path, "<$1>")
	return rt.method + " /hooks/" + p
}

// TestAdminRoutesDocumented: the admin API's tables in docs/operations.md
// list exactly the routes of adminRoutes, each once.
func TestAdminRoutesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := docRoute.FindStringSubmatch(line); m != nil {
			documented[m[1]+" "+m[2]]++
		}
	}
	var want []string
	for _, rt := range adminRoutes {
		d := routeDoc(rt)
		want = append(want, d)
		switch n := documented[d]; n {
		case 0:
			t.Errorf("docs/operations.md has no table row for %s (a route of adminRoutes): add `| `%s` | <answer> |`", d, d)
		case 1:
		default:
			t.Errorf("docs/operations.md has %d rows for %s", n, d)
		}
	}
	for d := range documented {
		if !slices.Contains(want, d) {
			t.Errorf("docs/operations.md documents %s, which is no route of adminRoutes", d)
		}
	}
	if len(documented) < 10 {
		t.Fatalf("read %d routes from docs/operations.md: the reader is broken", len(documented))
	}
}
