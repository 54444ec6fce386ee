package caddyhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
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
	forwardIP bool
	urls      [KindAgent + 1]*url.URL // by Kind; parsed once, never modified
	transport *http.Transport
}

// newGatewayClient returns a client for addr.
func newGatewayClient(addr gatewayAddr, prefix, token string, timeout time.Duration, forwardIP bool) *gatewayClient {
	dialer := &net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, addr.network, addr.address)
		},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     false,
	}
	c := &gatewayClient{addr: addr, prefix: strings.TrimRight(prefix, "/"), timeout: timeout, forwardIP: forwardIP, transport: tr}
	if token != "" {
		c.auth = "Bearer " + token
		c.authValue = []string{c.auth}
	}
	for _, k := range []Kind{KindWake, KindAgent} {
		c.urls[k] = &url.URL{Scheme: "http", Host: "gateway", Path: c.prefix + "/" + k.String()}
	}
	return c
}

// close drops the idle connections.
func (c *gatewayClient) close() { c.transport.CloseIdleConnections() }

// gatewayReply is a gateway answer: the status and its body.
type gatewayReply struct {
	status int
	body   []byte
}

// errGatewayTimeout marks a dispatch that ran out of time.
var errGatewayTimeout = errors.New("gateway timeout")

// send posts body to {prefix}/{kind}. A transport error is returned as is;
// a timeout as errGatewayTimeout. The request goes straight to the
// transport: the context bounds the whole exchange (an http.Client
// timeout would add a timer and a goroutine per request), and a redirect
// is the gateway's answer, not something to follow.
func (c *gatewayClient) send(ctx context.Context, kind Kind, body []byte, eventID, clientIP string) (gatewayReply, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req := (&http.Request{
		Method: http.MethodPost, URL: c.urls[kind], Host: "gateway",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":    jsonContentType[:1:1],
			"Idempotency-Key": {eventID},
		},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		// lets the transport replay the request on a pooled connection the
		// gateway closed meanwhile (it carries an Idempotency-Key)
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}).WithContext(ctx)
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
	return gatewayReply{status: resp.StatusCode, body: data}, nil
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

// outcome turns a gateway reply or error into what the caller gets:
// 2xx passes through, a 4xx with {"ok":false,"error":…} is a 400
// "gateway: …", other answers 502, a timeout 504.
func (r gatewayReply) outcome(err error) *hookError {
	switch {
	case errors.Is(err, errGatewayTimeout):
		return reject(http.StatusGatewayTimeout, "gateway timeout")
	case err != nil:
		return reject(http.StatusBadGateway, "gateway unreachable")
	case r.status >= 200 && r.status < 300:
		return nil
	case r.status >= 400 && r.status < 500:
		var e struct {
			OK    *bool  `json:"ok"`
			Error string `json:"error"`
		}
		if json.Unmarshal(r.body, &e) == nil && e.OK != nil && !*e.OK && e.Error != "" {
			return reject(http.StatusBadRequest, "gateway: "+e.Error)
		}
	}
	return reject(http.StatusBadGateway, fmt.Sprintf("gateway error (status %d)", r.status))
}
