package caddyhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// maxGatewayReply bounds how much of a gateway reply is read.
const maxGatewayReply = 1 << 20

// gatewayAddr is a parsed `gateway` value: a Unix socket or loopback TCP.
type gatewayAddr struct {
	network string // "unix" or "tcp"
	address string
}

// parseGatewayAddr accepts `unix//path/to.sock` or a loopback `host:port`.
func parseGatewayAddr(s string) (gatewayAddr, error) {
	s = strings.TrimSpace(s)
	if path, ok := strings.CutPrefix(s, "unix/"); ok {
		if path == "" || !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, ".") {
			return gatewayAddr{}, fmt.Errorf("gateway: %q: want unix//absolute/path.sock", s)
		}
		return gatewayAddr{"unix", path}, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || port == "" {
		return gatewayAddr{}, fmt.Errorf("gateway: %q: want unix//path.sock or a loopback host:port", s)
	}
	if host != "localhost" {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.IsLoopback() {
			return gatewayAddr{}, fmt.Errorf("gateway: %q: a TCP gateway must be on loopback (127.0.0.1, ::1 or localhost); use a Unix socket otherwise", s)
		}
	}
	return gatewayAddr{"tcp", s}, nil
}

// gatewayClient speaks the gateway protocol over a pooled keep-alive
// connection set.
type gatewayClient struct {
	addr      gatewayAddr
	prefix    string
	auth      string   // "Bearer <gateway_token>", or "" for none
	authValue []string // auth as a header value, shared by every request
	timeout   time.Duration
	// waitTimeout bounds a request that waits for the run to complete.
	waitTimeout time.Duration
	forwardIP   bool
	urls        [kindAgent + 1]*url.URL // by Kind; parsed once, never modified
	paths       [kindAgent + 1]string   // their paths
	transport   *http.Transport
}

// newGatewayClient returns a client for addr.
func newGatewayClient(addr gatewayAddr, prefix, token string, timeout time.Duration, forwardIP bool) *gatewayClient {
	dialer := &net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, addr.network, addr.address)
		},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		// no ResponseHeaderTimeout: each request's context bounds it, and
		// a request waiting for its run to complete has a longer one
		ForceAttemptHTTP2: false,
	}
	c := &gatewayClient{addr: addr, prefix: strings.TrimRight(prefix, "/"), timeout: timeout, waitTimeout: timeout,
		forwardIP: forwardIP, transport: tr}
	if token != "" {
		c.auth = "Bearer " + token
		c.authValue = []string{c.auth}
	}
	for _, k := range []actionKind{kindWake, kindAgent} {
		c.paths[k] = c.prefix + "/" + k.String()
		c.urls[k] = &url.URL{Scheme: "http", Host: "gateway", Path: c.paths[k]}
	}
	return c
}

// address is the gateway's address as configured (for the log).
func (c *gatewayClient) address() string { return c.addr.String() }

// setWaitTimeout sets the bound of a request that waits for its run
// (gateway_wait_timeout).
func (c *gatewayClient) setWaitTimeout(d time.Duration) { c.waitTimeout = d }

// forwardsClientIP reports gateway_forward_client_ip: the gateway gets
// the client address as X-Forwarded-For.
func (c *gatewayClient) forwardsClientIP() bool { return c.forwardIP }

// kindPath is the gateway path of a rendered action of kind k.
func (c *gatewayClient) kindPath(k actionKind) string { return c.paths[k] }

// prefixed is rest below the gateway prefix.
func (c *gatewayClient) prefixed(rest string) string { return c.prefix + rest }

// belowPrefix is the part of path below the gateway prefix (path itself
// when it is not below it).
func (c *gatewayClient) belowPrefix(path string) string { return strings.TrimPrefix(path, c.prefix) }

// close drops the idle connections.
func (c *gatewayClient) close() { c.transport.CloseIdleConnections() }

// gatewayReply is a gateway answer: the status, its body and its
// Retry-After header.
type gatewayReply struct {
	status     int
	body       []byte
	retryAfter string
}

// noUserAgent, as a User-Agent value, makes the transport send none.
var noUserAgent = []string{""}

// Reasons for gateway failures.
const (
	reasonGatewayTimeout = "gateway timeout: the run may have started; retry with the same Idempotency-Key so that it does not run twice"
	reasonGatewayDown    = "gateway unreachable"
	// reasonGatewayAuth answers a gateway refusal of the edge itself
	// (401, 403, 407, 429). The sender learns nothing of the edge's
	// configuration; the operator gets the detail in the log (see
	// dispatcher.gatewayFailure).
	reasonGatewayAuth = "gateway unavailable"
)

// errGatewayTimeout marks a dispatch that ran out of time.
var errGatewayTimeout = errors.New("gateway timeout")

// gatewayRequest is one request to the gateway: a rendered action (sent
// to {prefix}/{kind}) or a forwarded request (sent to path with header).
type gatewayRequest struct {
	kind actionKind
	path string // forwarded: the gateway path and query; "" = by kind
	// header, for a forwarded request, is what crosses to the gateway
	// (crossingHeaders: the sender's Host under "Host", its Idempotency-Key
	// if any) and is sent as it is; it is owned by the request (send adds
	// the edge's credential and trace context to it).
	header  http.Header
	body    []byte
	idemKey string        // a rendered action's Idempotency-Key header
	timeout time.Duration // 0 = the client's timeout
}

// url returns the request URL.
func (c *gatewayClient) url(g *gatewayRequest) *url.URL {
	if g.path == "" || g.path == c.paths[g.kind] {
		return c.urls[g.kind]
	}
	p, q, _ := strings.Cut(g.path, "?")
	if strings.HasPrefix(p, "//") {
		// a gateway prefix "/" and a name sent with leading slashes: one
		// slash (the gateway strips them), never an authority
		p = "/" + strings.TrimLeft(p, "/")
	}
	// sent as it is: a forwarded path keeps the escapes the sender chose
	return &url.URL{Scheme: "http", Host: "gateway", Opaque: p, RawQuery: q}
}

// send posts g. A transport error is returned as is; a timeout as
// errGatewayTimeout. The request goes straight to the transport: the
// context bounds the whole exchange (an http.Client timeout would add a
// timer and a goroutine per request), and a redirect is the gateway's
// answer, not something to follow.
func (c *gatewayClient) send(ctx context.Context, g *gatewayRequest, clientIP string) (gatewayReply, error) {
	timeout := c.timeout
	if g.timeout > 0 {
		timeout = g.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := g.body
	hdr, host := g.header, "gateway"
	chunked := false
	if hdr != nil {
		// framed as the sender framed it (D18 of issue 35): a chunked
		// body chunked (the forwarder's mark, which the transport would
		// not write anyway), an empty one with Content-Length: 0
		if _, chunked = hdr[headerChunked]; chunked {
			delete(hdr, headerChunked)
		}
		if h := hdr["Host"]; len(h) == 1 && h[0] != "" {
			host = h[0] // the transport writes it from req.Host, never from the map
		}
		if _, ok := hdr["User-Agent"]; !ok {
			hdr["User-Agent"] = noUserAgent // the sender sent none: add none
		}
		if _, ok := hdr["Idempotency-Key"]; !ok {
			// not sent, but lets the transport replay the request on a
			// pooled connection the gateway closed before reading it
			hdr["Idempotency-Key"] = nil
		}
	} else {
		hdr = http.Header{
			"Content-Type":    jsonContentType[:1:1],
			"Idempotency-Key": {g.idemKey},
		}
	}
	req := (&http.Request{
		Method: http.MethodPost, URL: c.url(g), Host: host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        hdr,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		// lets the transport replay the request on a pooled connection the
		// gateway closed meanwhile (it carries an Idempotency-Key)
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}).WithContext(ctx)
	switch {
	case chunked:
		req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	case len(body) == 0:
		// a non-nil body of length 0 would be sent chunked
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	if c.authValue != nil {
		req.Header["Authorization"] = c.authValue
	}
	if c.forwardIP && clientIP != "" {
		req.Header["X-Forwarded-For"] = []string{clientIP}
	}
	traceFrom(ctx).setHeaders(req.Header)
	resp, err := c.transport.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			return gatewayReply{}, errGatewayTimeout
		}
		return gatewayReply{}, err
	}
	defer resp.Body.Close()
	data, err := readReply(resp)
	if err != nil {
		if ctx.Err() != nil || isTimeout(err) {
			return gatewayReply{}, errGatewayTimeout
		}
		return gatewayReply{}, err
	}
	return gatewayReply{status: resp.StatusCode, body: data, retryAfter: resp.Header.Get("Retry-After")}, nil
}

// waitTimeoutFor is the bound of a request that waits for its run: the
// run's own timeout plus the admission time, at most waitTimeout.
func (c *gatewayClient) waitTimeoutFor(timeoutSeconds int64) time.Duration {
	if timeoutSeconds <= 0 {
		return c.waitTimeout
	}
	d := c.timeout + time.Duration(min(timeoutSeconds, int64(c.waitTimeout/time.Second)))*time.Second
	return max(c.timeout, min(d, c.waitTimeout))
}

// readReply reads at most maxGatewayReply bytes of a reply body, in one
// exact allocation when the length is announced.
func readReply(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxGatewayReply {
		data := make([]byte, n)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxGatewayReply))
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// gatewayProbeTimeout bounds the start-up reachability check (the gateway
// is a Unix socket or a loopback address: it answers at once or never).
const gatewayProbeTimeout = time.Second

// probe warns, at provision (so also under `caddy validate`), when
// nothing accepts connections at the gateway address: otherwise a missing
// socket stays invisible until the first request gets a 502. It never
// fails the config: the gateway may well start after Caddy. Only a
// handler inside an HTTP server is checked (a dry run is not).
// spooled says whether accepted events wait in a spool.
func (c *gatewayClient) probe(ctx caddy.Context, logger *zap.Logger, spooled bool) {
	if _, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); !ok {
		return
	}
	conn, err := net.DialTimeout(c.addr.network, c.addr.address, gatewayProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return
	}
	then := "requests will get 502 until it is up"
	if spooled {
		then = "accepted events wait in the spool until it is up"
	}
	logger.Warn("gateway not reachable at start; "+then,
		zap.String("gateway", c.addr.String()), zap.Error(err))
}

// String formats the address as configured: unix//path.sock or host:port.
func (a gatewayAddr) String() string {
	if a.network == "unix" {
		return "unix/" + a.address
	}
	return a.address
}
