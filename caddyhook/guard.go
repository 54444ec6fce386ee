package caddyhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
)

// headerServiceToken is the alternative token header.
const headerServiceToken = "X-Service-Token"

// tokenParam reports whether a URL parameter name, as sent, is "token":
// the name the reference gateway refuses, in any case, percent- or
// plus-encoded, with blanks around it.
func tokenParam(key string) bool {
	if len(key) < 5 {
		return false
	}
	if strings.EqualFold(key, "token") {
		return true
	}
	if strings.ContainsAny(key, "%+") {
		if k, err := url.QueryUnescape(key); err == nil && strings.EqualFold(strings.TrimSpace(k), "token") {
			return true
		}
	}
	return false
}

// credentialParam reports whether a URL parameter name, decoded, mentions a
// token (access_token, hook_token, …): its value is kept out of the access
// log even where the request is not refused for it.
func credentialParam(key string) bool {
	if len(key) < 5 {
		return false
	}
	if strings.ContainsAny(key, "%+") {
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
	}
	for i := 0; i+5 <= len(key); i++ {
		if strings.EqualFold(key[i:i+5], "token") {
			return true
		}
	}
	return false
}

// nextParam splits the first parameter off a query. Parameters are
// separated by "&", by ";" (which some servers and frameworks accept) and
// by "#" (a fragment sent on the wire arrives as part of the query).
func nextParam(raw string) (param, rest string) {
	if i := strings.IndexAny(raw, "&;#"); i >= 0 {
		return raw[:i], raw[i+1:]
	}
	return raw, ""
}

// splitTarget splits a request target into its path and the rest after the
// first "?", ";" or "#" (parameters, in whichever of those forms).
func splitTarget(target string) (path, params string) {
	if i := strings.IndexAny(target, "?;#"); i >= 0 {
		return target[:i], target[i+1:]
	}
	return target, ""
}

// requestTarget is the request target as the client sent it (what Caddy's
// access log shows as uri).
func requestTarget(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// queryHasToken reports whether any parameter of a query is named token
// (see tokenParam), without allocating for queries that have none.
func queryHasToken(raw string) bool {
	for raw != "" {
		var part string
		part, raw = nextParam(raw)
		key, _, _ := strings.Cut(part, "=")
		if tokenParam(key) {
			return true
		}
	}
	return false
}

// urlToken reports whether the request target carries a hook token: a
// parameter named token (in the query, after a ";" or in a fragment sent on
// the wire), or a path segment or parameter that is one of the configured
// tokens (under any name, percent- or plus-encoded). Such a request is
// refused with 400 before anything else: the token is in the URL, which
// proxies, browsers and logs keep.
func (h *Handler) urlToken(r *http.Request) bool {
	refuse, _ := h.scanTarget(requestTarget(r))
	return refuse
}

// scanTarget reports whether a request target carries a token (refuse:
// see urlToken) and whether it carries anything the access log must not
// show (redact: that, or a parameter whose name mentions a token, such as
// access_token).
func (h *Handler) scanTarget(target string) (refuse, redact bool) {
	path, params := splitTarget(target)
	for params != "" {
		var part string
		part, params = nextParam(params)
		key, val, _ := strings.Cut(part, "=")
		if tokenParam(key) || h.isToken(key, url.QueryUnescape) || h.isToken(val, url.QueryUnescape) {
			return true, true
		}
		redact = redact || credentialParam(key)
	}
	for path != "" {
		var seg string
		seg, path, _ = strings.Cut(path, "/")
		if h.isToken(seg, url.PathUnescape) {
			return true, true
		}
	}
	return false, redact
}

// redactTarget replaces in a request target every path segment or
// parameter that is a token with REDACTED, and the value of every
// parameter whose name is or mentions a token.
func (h *Handler) redactTarget(target string) string {
	path, params := splitTarget(target)
	var b strings.Builder
	b.Grow(len(target))
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if h.isToken(seg, url.PathUnescape) {
			seg = "REDACTED"
		}
		b.WriteString(seg)
	}
	if len(path) == len(target) {
		return b.String()
	}
	b.WriteByte(target[len(path)])
	for params != "" {
		part, sep := params, ""
		if i := strings.IndexAny(params, "&;#"); i >= 0 {
			part, sep, params = params[:i], params[i:i+1], params[i+1:]
		} else {
			params = ""
		}
		key, val, _ := strings.Cut(part, "=")
		switch {
		case h.isToken(key, url.QueryUnescape):
			part = "REDACTED"
		case tokenParam(key) || credentialParam(key) || h.isToken(val, url.QueryUnescape):
			part = key + "=REDACTED"
		}
		b.WriteString(part)
		b.WriteString(sep)
	}
	return b.String()
}

// isToken reports whether s, decoded with unescape, is one of the hook
// tokens. Strings shorter than a token are not hashed.
func (h *Handler) isToken(s string, unescape func(string) (string, error)) bool {
	if len(s) < minTokenLength {
		return false
	}
	if strings.ContainsAny(s, "%+") {
		if d, err := unescape(s); err == nil {
			s = d
		}
	}
	return h.tokenMatches(strings.TrimSpace(s))
}

// tokenDigest is the SHA-256 of a token; comparing digests in constant time
// makes the comparison independent of the presented token's length.
type tokenDigest [sha256.Size]byte

// presentedToken extracts the token from Authorization: Bearer (scheme
// case-insensitive), else from the first of the token headers (canonical
// names: x-service-token and the token_headers aliases) that has a value;
// "" when none carries one.
func presentedToken(h http.Header, tokenHeaders []string) string {
	if v := h.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			if t := strings.TrimSpace(v[7:]); t != "" {
				return t
			}
		}
	}
	for _, name := range tokenHeaders {
		if v := h[name]; len(v) > 0 {
			if t := strings.TrimSpace(v[0]); t != "" {
				return t
			}
		}
	}
	return ""
}

// tokenMatches compares the presented token with every configured token in
// constant time: all are compared, so the time taken does not tell which
// one matched, or how many there are to try.
func (h *Handler) tokenMatches(presented string) bool {
	return tokenIndex(presented, h.tokens) >= 0
}

// tokenIndex returns the index of the token in want that presented
// matches, or -1, comparing with all of them in constant time.
func tokenIndex(presented string, want []tokenDigest) int {
	if presented == "" {
		return -1
	}
	got := tokenDigest(sha256.Sum256([]byte(presented)))
	found := -1
	for i := range want {
		eq := subtle.ConstantTimeCompare(got[:], want[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	return found
}

// isJSONContentType accepts application/json (with parameters) and the
// +json structured suffixes.
func isJSONContentType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// errBodyTooLarge reports a body over the limit.
var errBodyTooLarge = errors.New("payload too large")

// readBody reads at most limit bytes of r's body into buf and fails with
// errBodyTooLarge past it, whether or not Content-Length was declared: an
// oversize chunked body is refused, never cut short.
func readBody(r *http.Request, limit int64, buf []byte) ([]byte, error) {
	if r.ContentLength > limit {
		return buf, errBodyTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return buf, nil
	}
	lr := io.LimitedReader{R: r.Body, N: limit + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Reasons of the authentication step.
const (
	reasonBadToken      = "invalid or missing token"
	reasonNoClientAddr  = "client address unknown (the proxy in front must send X-Forwarded-For)"
	reasonLockedOut     = "locked out"
	reasonTooManyUnauth = "too many unauthenticated requests in progress"
)

// authenticate runs the steps before the body: the client address, the
// lockout, the method and the token. A locked address gets no token
// compared; it is answered 429 at once unless the hook name is a signed
// one and the request carries a signature header, which is then checked
// (never the token): a lock never blocks a valid provider signature, so a
// third party cannot lock a provider's shared address out. A request that
// neither has the token nor offers a signature is refused here, before its
// body is read.
func (h *Handler) authenticate(ex *exchange) *hookError {
	if !ex.ip.IsValid() {
		// behind a Unix socket without a forwarded address: no key to
		// count failures against, so nothing is evaluated
		return reject(http.StatusForbidden, reasonNoClientAddr)
	}
	if h.addrCheck.leftmost(ex.r) {
		return reject(http.StatusInternalServerError, reasonLeftmostForwarded)
	}
	signed := h.mayVerify(ex.sub) && h.signatureOffered(ex)
	if left, locked := h.lockout.Locked(ex.ip, ex.now); locked {
		if !signed {
			return lockedOut(left)
		}
		ex.lockedFor = left
	}
	if ex.r.Method != http.MethodPost {
		return reject(http.StatusMethodNotAllowed, "method not allowed")
	}
	if ex.lockedFor == 0 {
		ex.tokenOK = h.tokenMatches(presentedToken(ex.r.Header, h.tokenHeaders))
	}
	switch {
	case ex.tokenOK:
		h.lockout.Reset(ex.ip)
	case !h.mayVerify(ex.sub):
		return h.authFailed(ex, reasonBadToken)
	case !signed:
		return h.authFailed(ex, ex.signatureReason())
	}
	return nil
}

// lockedOut is the 429 of a locked address.
func lockedOut(left time.Duration) *hookError {
	return &hookError{status: http.StatusTooManyRequests, reason: reasonLockedOut, retryAfter: left}
}

// authFailed records a failed authentication and returns the 401; a
// request from a locked address (one that offered a signature) gets the
// 429 instead and is not counted again.
func (h *Handler) authFailed(ex *exchange, reason string) *hookError {
	return h.failure(ex, http.StatusUnauthorized, reason)
}

// failure counts a failure of ex's address and returns status and reason,
// or the 429 when the address is locked.
func (h *Handler) failure(ex *exchange, status int, reason string) *hookError {
	if ex.lockedFor > 0 {
		return lockedOut(ex.lockedFor)
	}
	h.metrics.authFailures.Inc()
	left, newly := h.lockout.Record(ex.ip, ex.now)
	if newly || left == 0 { // counted here: the other nodes count it too
		h.clusterFailure(ex.ip, ex.now, newly, ex.now.Add(left))
	}
	switch {
	case newly:
		h.logger.Warn("client locked out after repeated auth failures",
			zap.String("client_ip", ex.ip.String()),
			zap.Int("failures", h.AuthFailures.Count),
			zap.Duration("window", time.Duration(h.AuthFailures.Window)),
			zap.Duration("lockout", h.lockout.policy.lockFor))
		h.events.lockedOut(ex.ip, ex.now.Add(left), h.base)
	case left > 0:
		// a concurrent request locked the address after this one's
		// lockout check: it learns nothing either
		return lockedOut(left)
	}
	return reject(status, reason)
}
