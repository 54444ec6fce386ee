package caddyhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// maxTokens bounds the hook tokens of one handler (each costs one
// comparison per request).
const maxTokens = 8

// provisionTokens expands and checks the hook tokens and the token header
// aliases: every token at least 32 characters with 8 distinct ones, no two
// alike, none equal to the gateway token.
func (h *Handler) provisionTokens(repl *caddy.Replacer, gwToken string) error {
	raws := h.tokenValues()
	if len(raws) > maxTokens {
		return fmt.Errorf("token: at most %d tokens (have %d)", maxTokens, len(raws))
	}
	if len(raws) == 0 {
		raws = []string{""}
	}
	plain := make([]string, len(raws))
	h.tokens = make([]tokenDigest, len(raws))
	for i, raw := range raws {
		field := "token"
		if len(raws) > 1 {
			field = fmt.Sprintf("token %d of %d", i+1, len(raws))
		}
		t := strings.TrimSpace(repl.ReplaceKnown(raw, ""))
		if t == "" {
			return fmt.Errorf("%s: %s", field, secret.Empty(raw, "token {env.HOOK_TOKEN}"))
		}
		if err := checkToken(t, gwToken); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		for j := range i {
			if constantTimeEqual(t, plain[j]) {
				return fmt.Errorf("%s: the same as token %d; every token must be different", field, j+1)
			}
		}
		plain[i] = t
		h.tokens[i] = tokenDigest(sha256Sum(t))
	}
	h.tokenHeaders = []string{headerServiceToken}
	for _, name := range h.TokenHeaders {
		name = strings.TrimSpace(name)
		if !validHeaderName(name) {
			return fmt.Errorf("token_headers: %q is not a header name", name)
		}
		c := textproto.CanonicalMIMEHeaderKey(name)
		if c == "Authorization" || c == "Cookie" || c == "Host" || c == "Content-Type" {
			return fmt.Errorf("token_headers: %s cannot carry the hook token", c)
		}
		if !h.isTokenHeader(c) {
			h.tokenHeaders = append(h.tokenHeaders, c)
		}
	}
	return nil
}

// tokenValues lists the configured token values (placeholders unexpanded).
func (h *Handler) tokenValues() []string {
	var out []string
	if h.Token != "" {
		out = append(out, h.Token)
	}
	return append(out, h.Tokens...)
}

// checkToken refuses a weak or reused hook token.
func checkToken(token, gwToken string) error {
	if err := secret.CheckStrength(token); err != nil {
		return err
	}
	switch {
	case gwToken != "" && constantTimeEqual(token, gwToken):
		return fmt.Errorf("must differ from gateway_token (the hook token is dedicated)")
	}
	return nil
}

// isTokenHeader reports whether the canonical header name carries the hook
// token (Authorization aside): x-service-token or a token_headers alias.
// Such headers never reach templates, transforms, logs or the gateway.
func (h *Handler) isTokenHeader(canonical string) bool {
	for _, n := range h.tokenHeaders {
		if n == canonical {
			return true
		}
	}
	return false
}

// validHeaderName reports an RFC 9110 field name.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// warnLiteralSecrets logs, once per provision, every secret written into
// the config as a literal. One rule for all secrets, in a Caddyfile or
// JSON: a literal is accepted with this warning, because Caddy keeps the
// loaded config as it is (the admin endpoint's /config/ and autosave.json
// show it in clear), while {env.…} and {file.…} keep only the placeholder.
func (h *Handler) warnLiteralSecrets(logger *zap.Logger) {
	warn := func(field string) {
		logger.Warn(secret.LiteralWarning,
			zap.String("field", field))
	}
	for i, raw := range h.tokenValues() {
		if isLiteralSecret(raw) {
			if i == 0 {
				warn("token")
			} else {
				warn(fmt.Sprintf("token %d", i+1))
			}
		}
	}
	if isLiteralSecret(h.GatewayToken) {
		warn("gateway_token")
	}
	for _, m := range h.Mappings {
		if m.Verify == nil {
			continue
		}
		for j, s := range m.Verify.Secrets {
			if isLiteralSecret(s) {
				warn(fmt.Sprintf("mapping %s: verify secret %d", m.ID, j+1))
			}
		}
	}
}

// isLiteralSecret reports a non-empty secret that holds no placeholder.
func isLiteralSecret(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !verify.IsSecretPlaceholder(s) && !secret.HasPlaceholder(s)
}

// tokenHeaderPresent reports whether r has any token header, even an empty
// one (a repeated header may carry the token in a later copy).
func (h *Handler) tokenHeaderPresent(r *http.Request) bool {
	for _, name := range h.tokenHeaders {
		if _, ok := r.Header[name]; ok {
			return true
		}
	}
	return false
}

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

// sha256Sum hashes a secret for constant-time comparison.
func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

// constantTimeEqual compares two secrets without leaking where they differ.
func constantTimeEqual(a, b string) bool {
	da, db := sha256Sum(a), sha256Sum(b)
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}
