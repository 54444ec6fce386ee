//go:build openclaw

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// tapRecord is what the tap saw of one request caddyhook sent towards the
// gateway, and what the gateway answered.
type tapRecord struct {
	path           string
	idempotencyKey string
	forwarded      bool   // the request carried a client-address header
	status         int    // the gateway's status; 502 when it was unreachable
	runID          string // "runId" of the gateway's JSON answer, if any
	eventOutcome   string // "eventOutcome" of the gateway's JSON answer, if any
}

// gatewayTap is a loopback HTTP/1.1 pass-through placed between caddyhook
// and the real gateway for the cases that must prove what the gateway did
// or did not see. It forwards requests unchanged (no forwarding headers are
// added) and records each one with the gateway's answer.
type gatewayTap struct {
	ln  net.Listener
	srv *http.Server

	mu   sync.Mutex
	seen []tapRecord
}

// newGatewayTap listens on a free loopback port and forwards to upstream
// (host:port); it is closed in t.Cleanup.
func newGatewayTap(t testing.TB, upstream string) *gatewayTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := &url.URL{Scheme: "http", Host: upstream}
	tp := &gatewayTap{ln: ln}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: &http.Transport{
			DialContext:       (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			DisableKeepAlives: true,
		},
		ModifyResponse: tp.observe,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, _ error) {
			tp.record(r, http.StatusBadGateway, nil)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	// The proxy strips forwarding headers from what it sends on, so note
	// whether caddyhook sent any before handing the request over.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fwd := r.Header.Get("X-Forwarded-For") != "" || r.Header.Get("Forwarded") != "" || r.Header.Get("X-Real-Ip") != ""
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, fwd)))
	})
	tp.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = tp.srv.Serve(ln) }()
	t.Cleanup(func() { _ = tp.srv.Close() })
	return tp
}

// addr is the tap's host:port (what caddyhook's `gateway` points at).
func (tp *gatewayTap) addr() string { return tp.ln.Addr().String() }

// observe records a gateway answer; the body is read and put back.
func (tp *gatewayTap) observe(resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	tp.record(resp.Request, resp.StatusCode, data)
	return nil
}

// forwardedKey carries, in a request context, whether caddyhook's request
// had a client-address header.
type forwardedKey struct{}

// record appends one observation. r is the request sent on to the gateway:
// caddyhook's path and headers (less forwarding headers) and its context.
func (tp *gatewayTap) record(r *http.Request, status int, body []byte) {
	fwd, _ := r.Context().Value(forwardedKey{}).(bool)
	rec := tapRecord{
		path:           r.URL.Path,
		idempotencyKey: r.Header.Get("Idempotency-Key"),
		forwarded:      fwd,
		status:         status,
	}
	var answer struct {
		RunID        string `json:"runId"`
		EventOutcome string `json:"eventOutcome"`
	}
	if json.Unmarshal(body, &answer) == nil {
		rec.runID, rec.eventOutcome = answer.RunID, answer.EventOutcome
	}
	tp.mu.Lock()
	tp.seen = append(tp.seen, rec)
	tp.mu.Unlock()
}

// count returns how many requests the tap has seen so far.
func (tp *gatewayTap) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.seen)
}

// since returns the records from index i on.
func (tp *gatewayTap) since(i int) []tapRecord {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapRecord(nil), tp.seen[i:]...)
}
