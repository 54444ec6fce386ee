package caddyhook

import (
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// rejectLogsPerSecond bounds the "hook request rejected" lines a handler
// writes per second. Most rejections (401, 405, a query token) happen
// before authentication, so without a bound every request of a flood
// would cost a log write and the disk would fill at the attacker's rate.
// The metrics still count every rejection.
const rejectLogsPerSecond = 20

// logBudget is a per-second allowance of log lines. A nil budget allows
// every line.
type logBudget struct {
	second     atomic.Int64 // the Unix second the allowance is for
	used       atomic.Int64
	suppressed atomic.Uint64 // lines left out since the last one written
}

// allow reports whether a line may be written at now and, if so, how many
// lines were left out before it. Lines are counted without locks; at a
// second boundary a few may slip through twice, which is harmless.
func (b *logBudget) allow(now time.Time) (ok bool, suppressed uint64) {
	if b == nil {
		return true, 0
	}
	if sec, old := now.Unix(), b.second.Load(); sec != old && b.second.CompareAndSwap(old, sec) {
		b.used.Store(0)
	}
	if b.used.Add(1) > rejectLogsPerSecond {
		b.suppressed.Add(1)
		return false, 0
	}
	return true, b.suppressed.Swap(0)
}

// gatewayFailure logs a dispatch the gateway did not take: no connection,
// a timeout, a 5xx (an answer the sender sees as 502/504, or a spooled
// event retried), or a refusal of caddyhook itself (401, 403, 407, 429:
// a wrong gateway_token, untrusted forwarded headers), with a hint for
// the operator that the sender's 502 leaves out. It names the gateway address and the error, never
// a token or payload, at most rejectLogsPerSecond lines a second.
func (h *Handler) gatewayFailure(kind actionKind, eventID string, status int, err error) {
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

// logRejection writes one line per rejection: status, reason, client
// address and route; never a token or payload content. Lockout 429s are
// logged at debug so a locked attacker cannot flood the log, and at most
// rejectLogsPerSecond lines a second are written, the next one saying how
// many were left out.
func (h *Handler) logRejection(ex *exchange, herr *hookError) {
	lvl := zapcore.InfoLevel
	if herr.status == http.StatusTooManyRequests {
		lvl = zapcore.DebugLevel
	}
	if !h.logger.Core().Enabled(lvl) {
		return
	}
	ok, suppressed := h.rejectLogs.allow(ex.now)
	if !ok {
		return // before Check: a suppressed line costs two atomic adds
	}
	ce := h.logger.Check(lvl, "hook request rejected")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.Int("status", herr.status),
		zap.String("reason", herr.reason),
		zap.String("client_ip", ex.ip.String()),
		zap.String("route", ex.route),
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed", suppressed))
	}
	ce.Write(fields...)
}
