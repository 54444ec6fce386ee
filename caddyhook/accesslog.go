package caddyhook

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// accessLogIdentity names the logger Caddy's servers write access entries
// to, so entries written here reach the same configured logs.
type accessLogIdentity struct{}

// CaddyModule gives the access logger's name; it is never registered.
func (accessLogIdentity) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.log.access", New: func() caddy.Module { return accessLogIdentity{} }}
}

// accessLog keeps hook tokens out of Caddy's access log. Caddy redacts
// Authorization by default but logs every other header and the request
// target verbatim, and it captures the request before any handler runs, so
// a token sent as x-service-token (even as a second copy after an empty
// one), as a token_headers alias, in the URL (?token=, ;token=, a
// fragment, ?access_token=, any parameter or path segment that is the
// token), or as Authorization when log_credentials is on, would be written
// as is. For such requests the handler asks Caddy to skip its entry and
// writes the same entry itself, with those headers and URL parts redacted.
//
// Provider signature headers get the same treatment: a signature that
// covers no timestamp (GitHub's) stays valid for its body forever.
type accessLog struct {
	logger *zap.Logger
	logs   *caddyhttp.ServerLogConfig
	tokens *tokenChecker
	// signatureHeaders are the canonical names of the headers carrying
	// the signatures the handler's verify blocks check.
	signatureHeaders []string
}

// newAccessLog returns nil when the server has no access log.
func newAccessLog(ctx caddy.Context, tokens *tokenChecker, signatureHeaders []string) *accessLog {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil || srv.Logs == nil {
		return nil
	}
	return &accessLog{logger: ctx.Logger(accessLogIdentity{}), logs: srv.Logs, tokens: tokens, signatureHeaders: signatureHeaders}
}

// takeOver reports whether r would leak a token into the access log and,
// if so, tells Caddy to skip its own entry for r: a token header, a
// signature, logged credentials, or a hook token (or a piece of one) in
// the target or in a header Caddy logs.
func (l *accessLog) takeOver(r *http.Request) bool {
	if l == nil {
		return false
	}
	if !l.tokens.headerPresent(r) && !l.signed(r) && !l.credentials(r) && !l.headersHold(r.Header) {
		if _, redact := l.tokens.scanTarget(requestTarget(r)); !redact {
			return false
		}
	}
	caddyhttp.SetVar(r.Context(), caddyhttp.LogSkipVar, true)
	return true
}

// headersHold reports whether a header that Caddy's access log shows (all
// but the credentials it redacts itself) holds a piece of a hook token.
func (l *accessLog) headersHold(h http.Header) bool {
	for name, vs := range h {
		if !l.logs.ShouldLogCredentials && caddyRedacts(name) {
			continue
		}
		if l.tokens.holds(name) || slices.ContainsFunc(vs, l.tokens.holds) {
			return true
		}
	}
	return false
}

// caddyRedacts reports the headers Caddy's access log redacts unless
// log_credentials is on.
func caddyRedacts(name string) bool {
	switch name {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	return false
}

// credentials reports an Authorization header that Caddy would log (with
// log_credentials on).
func (l *accessLog) credentials(r *http.Request) bool {
	_, ok := r.Header["Authorization"]
	return ok && l.logs.ShouldLogCredentials
}

// signed reports whether r carries one of the signature headers.
func (l *accessLog) signed(r *http.Request) bool {
	for _, name := range l.signatureHeaders {
		if _, ok := r.Header[name]; ok {
			return true
		}
	}
	return false
}

// emit writes the access entry Caddy skipped, with tokens redacted.
func (l *accessLog) emit(r *http.Request, status, size int, start time.Time) {
	clean := *r
	clean.RequestURI = l.tokens.redactTarget(requestTarget(r))
	clean.Header = make(http.Header, len(r.Header))
	for name, vs := range r.Header {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = l.tokens.redact(v)
		}
		clean.Header[l.tokens.redact(name)] = out
	}
	for _, names := range [][]string{{"Authorization", "Proxy-Authorization", "Cookie"}, l.tokens.headerNames(), l.signatureHeaders} {
		for _, name := range names {
			if _, ok := clean.Header[name]; ok {
				clean.Header[name] = []string{"REDACTED"}
			}
		}
	}
	req := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: &clean})
	fields := []zapcore.Field{
		req,
		zap.Int("bytes_read", int(max(r.ContentLength, 0))),
		zap.String("user_id", ""),
		zap.Duration("duration", time.Since(start)),
		zap.Int("size", size),
		zap.Int("status", status),
	}
	lvl := zapcore.InfoLevel
	if status >= 500 {
		lvl = zapcore.ErrorLevel
	}
	for _, lg := range l.loggers(r) {
		if ce := lg.Check(lvl, "handled request"); ce != nil {
			ce.Write(fields...)
		}
	}
}

// loggers picks the access loggers for r's host as Caddy does.
func (l *accessLog) loggers(r *http.Request) []*zap.Logger {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	names, ok := l.logs.LoggerNames[strings.ToLower(host)]
	if !ok {
		labels := strings.Split(strings.ToLower(host), ".")
		for i := range labels {
			if labels[i] == "" {
				continue
			}
			labels[i] = "*"
			if names, ok = l.logs.LoggerNames[strings.Join(labels, ".")]; ok {
				break
			}
		}
	}
	if !ok {
		if l.logs.SkipUnmappedHosts {
			return nil
		}
		names = []string{l.logs.DefaultLoggerName}
	}
	out := make([]*zap.Logger, 0, len(names))
	for _, n := range names {
		if n == "" {
			out = append(out, l.logger)
		} else {
			out = append(out, l.logger.Named(n))
		}
	}
	return out
}
