package caddyhook

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// testGateway is a devgw gateway serving on a Unix socket in a private
// temp dir; it stops when the test ends.
type testGateway struct {
	*devgw.Gateway
	sock string
}

// startTestGateway starts a gateway that wants utGatewayToken (whatever
// cfg.Token says). cfg.Record keeps every request for inspection (leave
// it off in benchmarks).
func startTestGateway(tb testing.TB, cfg devgw.Config) *testGateway {
	tb.Helper()
	cfg.Token = utGatewayToken
	return serveGateway(tb, cfg)
}

// serveGateway starts a devgw gateway with cfg on a Unix socket of its own.
func serveGateway(tb testing.TB, cfg devgw.Config) *testGateway {
	tb.Helper()
	dir, err := os.MkdirTemp("", "chku") // short: socket paths are limited to ~100 bytes
	if err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "gw.sock")
	ln, err := devgw.Listen("unix/" + sock)
	if err != nil {
		tb.Fatal(err)
	}
	gw := devgw.New(cfg)
	srv := devgw.Server(gw)
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		_ = os.RemoveAll(dir)
	})
	return &testGateway{Gateway: gw, sock: sock}
}

// newTestHandler provisions a handler in front of gw (nil: a socket that
// does not exist); mod adjusts the config first. Logs are discarded
// unless mod sets the handler's logger.
func newTestHandler(tb testing.TB, gw *testGateway, mod func(h *Handler)) *Handler {
	tb.Helper()
	h := validHandler()
	if gw != nil {
		h.Gateway = "unix/" + gw.sock
	} else {
		h.Gateway = "unix/" + filepath.Join(tb.TempDir(), "absent.sock")
	}
	h.logger = zap.NewNop()
	if mod != nil {
		mod(h)
	}
	if err := provision(tb, h); err != nil {
		tb.Fatalf("Provision: %v", err)
	}
	return h
}

// nextStatus is what the next handler answers, to tell pass-through apart.
const nextStatus = http.StatusTeapot

// passThrough is the next handler of the unit tests.
var passThrough = caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
	w.WriteHeader(nextStatus)
	return nil
})

// hookRequest describes one request to the handler.
type hookRequest struct {
	method   string // default POST
	target   string
	body     string
	chunked  bool   // send without Content-Length
	remote   string // client address, default 192.0.2.1
	clientIP string // Caddy's resolved client IP var, if set
	header   []string
}

// auth is the header pair that carries the unit-test hook token.
var auth = []string{"Authorization", "Bearer " + utHookToken}

// jsonCT is the usual JSON content type header pair.
var jsonCT = []string{"Content-Type", "application/json"}

// serve runs rq through h.ServeHTTP and returns the recorded answer.
func serve(tb testing.TB, h *Handler, rq hookRequest) *httptest.ResponseRecorder {
	tb.Helper()
	method := rq.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader = strings.NewReader(rq.body)
	if rq.chunked {
		body = io.MultiReader(strings.NewReader(rq.body)) // hides the length
	}
	r := httptest.NewRequest(method, rq.target, body)
	if rq.chunked {
		r.ContentLength = -1
	}
	remote := rq.remote
	if remote == "" {
		remote = "192.0.2.1"
	}
	r.RemoteAddr = remote + ":40000"
	if strings.Contains(remote, ":") {
		r.RemoteAddr = "[" + remote + "]:40000"
	}
	if rq.clientIP != "" {
		vars := map[string]any{caddyhttp.ClientIPVarKey: rq.clientIP}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	}
	for i := 0; i+1 < len(rq.header); i += 2 {
		r.Header.Add(rq.header[i], rq.header[i+1])
	}
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, passThrough); err != nil {
		tb.Fatalf("ServeHTTP: %v", err)
	}
	return w
}

// headers joins header pairs.
func headers(pairs ...[]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, p...)
	}
	return out
}

// runningHook is a hooks handler of the running config and the http
// server (site listener) it belongs to.
type runningHook struct {
	h      *Handler
	server string
}

// runningHooks finds the hooks handlers of the running config in its
// http servers' routes (subroutes included), ordered by server name.
func runningHooks(tb testing.TB) []runningHook {
	tb.Helper()
	app, err := caddy.ActiveContext().AppIfConfigured("http")
	if err != nil {
		return nil
	}
	httpApp := app.(*caddyhttp.App)
	var out []runningHook
	var walk func(server string, routes caddyhttp.RouteList)
	walk = func(server string, routes caddyhttp.RouteList) {
		for _, rt := range routes {
			for _, mh := range rt.Handlers {
				switch x := mh.(type) {
				case *Handler:
					out = append(out, runningHook{h: x, server: server})
				case *caddyhttp.Subroute:
					walk(server, x.Routes)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(httpApp.Servers)) {
		walk(name, httpApp.Servers[name].Routes)
	}
	return out
}

// hangBound is the "did not hang" bound of the tests that check that
// something (a transform budget, a gateway timeout, a lock wait) stopped a
// call: far above the configured limits, so that only a call the limit
// failed to stop can reach it, however loaded the machine.
const hangBound = 10 * time.Second
