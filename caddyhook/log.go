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

// rejectionLog writes the "hook request rejected" lines, within their
// budget.
type rejectionLog struct {
	logger *zap.Logger
	budget logBudget
	tokens *tokenChecker // redacts a token a reason echoes
}

// write writes one line per rejection: status, reason, client address
// and route; never a token or payload content. Lockout 429s are logged at
// debug so a locked attacker cannot flood the log, and at most
// rejectLogsPerSecond lines a second are written, the next one saying how
// many were left out.
func (l *rejectionLog) write(ex *exchange, herr *hookError) {
	lvl := zapcore.InfoLevel
	if herr.status == http.StatusTooManyRequests {
		lvl = zapcore.DebugLevel
	}
	if !l.logger.Core().Enabled(lvl) {
		return
	}
	ok, suppressed := l.budget.allow(ex.now)
	if !ok {
		return // before Check: a suppressed line costs two atomic adds
	}
	ce := l.logger.Check(lvl, "hook request rejected")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.Int("status", herr.status),
		zap.String("reason", l.tokens.redact(herr.reason)), // some reasons echo what was sent
		zap.String("client_ip", ex.ip.String()),
		zap.String("route", ex.route),
	}
	if len(ex.passed) > 0 {
		fields = append(fields, zap.Strings("passed_over", ex.passed))
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed", suppressed))
	}
	ce.Write(fields...)
}

// skipped writes the debug line of a request answered 204: the mapping
// that took it, why it dispatched nothing, and the mappings passed over
// before it (no payload content: mapping ids, for_each keys and which
// condition failed).
func (l *rejectionLog) skipped(ex *exchange) {
	if !l.logger.Core().Enabled(zapcore.DebugLevel) {
		return
	}
	if ok, _ := l.budget.allow(ex.now); !ok {
		return
	}
	fields := []zap.Field{
		zap.String("mapping", ex.mapping),
		zap.String("reason", ex.skip),
		zap.String("client_ip", ex.ip.String()),
	}
	if len(ex.passed) > 0 {
		fields = append(fields, zap.Strings("passed_over", ex.passed))
	}
	l.logger.Debug("hook request skipped", fields...)
}
