package caddyhook

import (
	"net"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// gatewayProbeTimeout bounds the start-up reachability check (the gateway
// is a Unix socket or a loopback address: it answers at once or never).
const gatewayProbeTimeout = time.Second

// checkGateway warns, at provision (so also under `caddy validate`), when
// nothing accepts connections at the gateway address: otherwise a missing
// socket stays invisible until the first request gets a 502. It never
// fails the config: the gateway may well start after Caddy. Only a
// handler inside an HTTP server is checked (a dry run is not).
func (h *Handler) checkGateway(ctx caddy.Context) {
	if _, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); !ok {
		return
	}
	conn, err := net.DialTimeout(h.gateway.addr.network, h.gateway.addr.address, gatewayProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return
	}
	then := "requests will get 502 until it is up"
	if h.Spool != nil {
		then = "accepted events wait in the spool until it is up"
	}
	h.logger.Warn("gateway not reachable at start; "+then,
		zap.String("gateway", h.gateway.addr.String()), zap.Error(err))
}

// gatewayFailure logs a dispatch the gateway did not take: no connection,
// a timeout, a 5xx (an answer the sender sees as 502/504, or a spooled
// event retried), or a refusal of caddyhook itself (401, 403, 407, 429:
// a wrong gateway_token, untrusted forwarded headers), with a hint for
// the operator that the sender's 502 leaves out. It names the gateway address and the error, never
// a token or payload, at most rejectLogsPerSecond lines a second.
func (h *Handler) gatewayFailure(kind Kind, eventID string, status int, err error) {
	if err == nil && status < 500 && !refusesEdge(status) {
		return
	}
	ok, suppressed := h.gatewayLogs.allow(time.Now())
	if !ok {
		return
	}
	fields := []zap.Field{zap.String("gateway", h.gateway.addr.String()), zap.String("kind", kind.String()),
		zap.String("event_id", eventID)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	} else {
		fields = append(fields, zap.Int("status", status))
	}
	if err == nil && refusesEdge(status) {
		// the sender got a bare 502 "gateway unavailable": the why is here
		fields = append(fields, zap.String("hint", "the gateway refused caddyhook itself: check gateway_token (the gateway's hooks token), "+
			"that the gateway does not see forwarded headers from the edge (gateway_forward_client_ip), and the gateway's own lockout"))
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed", suppressed))
	}
	h.logger.Warn("gateway dispatch failed", fields...)
}

// String formats the address as configured: unix//path.sock or host:port.
func (a gatewayAddr) String() string {
	if a.network == "unix" {
		return "unix/" + a.address
	}
	return a.address
}
