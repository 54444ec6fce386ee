package caddyhook

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/internal/secret"
)

// maxTokens bounds the hook tokens of one handler (each costs one
// comparison per request).
const maxTokens = 8

// minTokenLength is the length of the shortest hook token
// (secret.CheckStrength): a shorter string is never compared.
const minTokenLength = 32

// reasonBadToken answers a request without a valid hook token.
const reasonBadToken = "invalid or missing token"

// headerServiceToken is the alternative token header.
const headerServiceToken = "X-Service-Token"

// reasonQueryToken answers a request that carries a token in its URL.
const reasonQueryToken = "token must not be sent in the URL; use Authorization: Bearer <token> or x-service-token"

// tokenChecker holds the hook tokens (as digests) and the names of the
// headers that carry one: it compares a presented token, finds a token in
// a request target and redacts it there. Immutable after newTokenChecker.
type tokenChecker struct {
	digests []tokenDigest
	// headers are the canonical names of the headers that carry the
	// hook token besides Authorization: X-Service-Token and the aliases.
	headers []string
	// shapes finds the tokens in text, to redact them (tokens_redact.go).
	shapes tokenShapes
}

// tokenDigest is the SHA-256 of a token; comparing digests in constant time
// makes the comparison independent of the presented token's length.
type tokenDigest [sha256.Size]byte

// newTokenChecker expands and checks the hook tokens raws (placeholders
// unexpanded) and the token header aliases: every token at least 32
// characters with 8 distinct ones, no two alike, none equal to the
// gateway token.
func newTokenChecker(raws, aliases []string, repl *caddy.Replacer, gwToken string) (*tokenChecker, error) {
	if len(raws) > maxTokens {
		return nil, fmt.Errorf("token: at most %d tokens (have %d)", maxTokens, len(raws))
	}
	if len(raws) == 0 {
		raws = []string{""}
	}
	t := &tokenChecker{digests: make([]tokenDigest, len(raws))}
	plain := make([]string, len(raws))
	for i, raw := range raws {
		field := "token"
		if len(raws) > 1 {
			field = fmt.Sprintf("token %d of %d", i+1, len(raws))
		}
		v := strings.TrimSpace(repl.ReplaceKnown(raw, ""))
		if v == "" {
			return nil, fmt.Errorf("%s: %s", field, secret.Empty(raw, "token {env.HOOK_TOKEN}"))
		}
		if err := checkToken(v, gwToken); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		for j := range i {
			if constantTimeEqual(v, plain[j]) {
				return nil, fmt.Errorf("%s: the same as token %d; every token must be different", field, j+1)
			}
		}
		plain[i] = v
		t.digests[i] = tokenDigest(sha256Sum(v))
	}
	t.shapes = newTokenShapes(plain)
	t.headers = []string{headerServiceToken}
	for _, name := range aliases {
		name = strings.TrimSpace(name)
		if !validHeaderName(name) {
			return nil, fmt.Errorf("token_headers: %q is not a header name", name)
		}
		c := textproto.CanonicalMIMEHeaderKey(name)
		if c == "Authorization" || c == "Cookie" || c == "Host" || c == "Content-Type" {
			return nil, fmt.Errorf("token_headers: %s cannot carry the hook token", c)
		}
		if !t.isHeader(c) {
			t.headers = append(t.headers, c)
		}
	}
	return t, nil
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

// count is the number of hook tokens.
func (t *tokenChecker) count() int { return len(t.digests) }

// headerNames are the canonical names of the headers that carry the hook
// token besides Authorization.
func (t *tokenChecker) headerNames() []string { return t.headers }

// isHeader reports whether the canonical header name carries the hook
// token (Authorization aside): x-service-token or a token_headers alias.
// Such headers never reach templates, transforms, logs or the gateway.
func (t *tokenChecker) isHeader(canonical string) bool {
	return slices.Contains(t.headers, canonical)
}

// headerPresent reports whether r has any token header, even an empty
// one (a repeated header may carry the token in a later copy).
func (t *tokenChecker) headerPresent(r *http.Request) bool {
	for _, name := range t.headers {
		if _, ok := r.Header[name]; ok {
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

// urlToken reports whether the request target carries a hook token: a
// parameter named token (in the query, after a ";" or in a fragment sent on
// the wire), or a path segment or parameter that is one of the configured
// tokens (under any name, percent- or plus-encoded). Such a request is
// refused with 400 before anything else: the token is in the URL, which
// proxies, browsers and logs keep.
func (t *tokenChecker) urlToken(r *http.Request) bool {
	refuse, _ := t.scanTarget(requestTarget(r))
	return refuse
}

// scanTarget reports whether a request target carries a token (refuse:
// see urlToken) and whether it carries anything the access log must not
// show (redact: that, or a parameter whose name mentions a token, such as
// access_token).
func (t *tokenChecker) scanTarget(target string) (refuse, redact bool) {
	path, params := splitTarget(target)
	for params != "" {
		var part string
		part, params = nextParam(params)
		key, val, _ := strings.Cut(part, "=")
		if tokenParam(key) || t.isToken(key, url.QueryUnescape) || t.isToken(val, url.QueryUnescape) {
			return true, true
		}
		redact = redact || credentialParam(key)
	}
	for path != "" {
		var seg string
		seg, path, _ = strings.Cut(path, "/")
		if t.isToken(seg, url.PathUnescape) {
			return true, true
		}
	}
	if t.holds(target) {
		// a whole token anywhere (after Bearer%20, split by a slash, …)
		// is refused; a piece of one is only kept out of the log
		return t.holdsToken(target), true
	}
	return false, redact
}

// redactTarget replaces in a request target every path segment or
// parameter that is a token with REDACTED, the value of every parameter
// whose name is or mentions a token, and then every other piece of a
// token (redact).
func (t *tokenChecker) redactTarget(target string) string {
	return t.redact(t.redactParts(target))
}

// redactParts is redactTarget's first step: the segments and parameters.
func (t *tokenChecker) redactParts(target string) string {
	path, params := splitTarget(target)
	var b strings.Builder
	b.Grow(len(target))
	for i, seg := range strings.Split(path, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if t.isToken(seg, url.PathUnescape) {
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
		case t.isToken(key, url.QueryUnescape):
			part = "REDACTED"
		case tokenParam(key) || credentialParam(key) || t.isToken(val, url.QueryUnescape):
			part = key + "=REDACTED"
		}
		b.WriteString(part)
		b.WriteString(sep)
	}
	return b.String()
}

// isToken reports whether s, decoded with unescape, is one of the hook
// tokens. Strings shorter than a token are not hashed.
func (t *tokenChecker) isToken(s string, unescape func(string) (string, error)) bool {
	if len(s) < minTokenLength {
		return false
	}
	if strings.ContainsAny(s, "%+") {
		if d, err := unescape(s); err == nil {
			s = d
		}
	}
	return t.matches(strings.TrimSpace(s))
}

// presented extracts the token from Authorization: Bearer (scheme
// case-insensitive), else from the first of the token headers
// (x-service-token and the token_headers aliases) that has a value; ""
// when none carries one.
func (t *tokenChecker) presented(h http.Header) string {
	if v := h.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			if s := strings.TrimSpace(v[7:]); s != "" {
				return s
			}
		}
	}
	for _, name := range t.headers {
		if v := h[name]; len(v) > 0 {
			if s := strings.TrimSpace(v[0]); s != "" {
				return s
			}
		}
	}
	return ""
}

// authorized reports whether the request's token headers carry the hook
// token and nothing else: at least one token value, and every value it
// presents is one of the configured tokens. The values are read as the
// gateway's HTTP parser (Node) reads them: a token header sent several
// times is one value, its copies joined with ", " (two copies, even two
// valid ones, are one wrong value: the gateway refuses them); each
// Authorization: Bearer value is one (Node keeps only the first
// Authorization header; the edge checks every copy, an empty copy among
// several being a wrong one). Values are trimmed; an empty one is none.
// A request that carries a wrong value beside a right one is refused:
// the edge must never let through what the gateway refuses. It is
// stricter than the gateway where the gateway reads only the first
// header it finds (a valid X-OpenClaw-Token beside a wrong
// x-service-token); docs/openclaw.md lists that difference. Each value is
// compared with every token in constant time; the request's headers are
// bounded by the server.
func (t *tokenChecker) authorized(h http.Header) bool {
	seen, ok := 0, true
	// check checks one value; of a header sent more than once an empty
	// copy is a wrong value too
	check := func(s string, copies int) {
		if s = strings.TrimSpace(s); s != "" || copies > 1 {
			seen++
			ok = s != "" && t.index(s) >= 0 && ok
		}
	}
	auth := h["Authorization"]
	for _, v := range auth {
		switch {
		case len(v) > 7 && strings.EqualFold(v[:7], "bearer "):
			check(v[7:], len(auth))
		case strings.TrimSpace(v) == "" && len(auth) > 1:
			check("", len(auth))
		}
	}
	for _, name := range t.headers {
		if vs := h[name]; len(vs) > 0 {
			check(strings.Join(vs, ", "), len(vs))
		}
	}
	return seen > 0 && ok
}

// matches compares the presented token with every configured token in
// constant time: all are compared, so the time taken does not tell which
// one matched, or how many there are to try.
func (t *tokenChecker) matches(presented string) bool {
	return t.index(presented) >= 0
}

// index returns the index of the configured token that presented
// matches, or -1, comparing with all of them in constant time.
func (t *tokenChecker) index(presented string) int {
	if presented == "" {
		return -1
	}
	got := tokenDigest(sha256.Sum256([]byte(presented)))
	found := -1
	for i := range t.digests {
		eq := subtle.ConstantTimeCompare(got[:], t.digests[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	return found
}

// sha256Sum hashes a secret for constant-time comparison.
func sha256Sum(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

// constantTimeEqual compares two secrets without leaking where they differ.
func constantTimeEqual(a, b string) bool {
	da, db := sha256Sum(a), sha256Sum(b)
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// redact returns s with every hook token, whole or in pieces of at least
// redactMin characters, in any encoding (tokens_redact.go), replaced by
// [REDACTED]: the one function that keeps the tokens out of what the event
// log, the console and the access log record (hook names, reasons, header
// names and values, idempotency keys, bodies, request targets). s itself
// is returned when it holds none (or t is nil: no token configured yet).
func (t *tokenChecker) redact(s string) string {
	if t == nil {
		return s
	}
	return t.shapes.redact(s)
}

// redactCut is redact, then a cut at max bytes (0: none), never inside a
// UTF-8 sequence.
func (t *tokenChecker) redactCut(s string, max int) string {
	return cutText(t.redact(s), max)
}

// holds reports whether s holds a piece of a hook token (see redact).
func (t *tokenChecker) holds(s string) bool { return len(t.shapes.find(s)) > 0 }

// holdsToken reports whether s holds a whole hook token, as written or
// with its escapes decoded, anywhere (not only as a path segment or a
// parameter: /hooks/Bearer%20<token>, a token split by an encoded slash).
func (t *tokenChecker) holdsToken(s string) bool { return t.shapes.holdsWhole(s, t.matches) }

// headerHolds reports whether a name or a value of h holds a piece of a
// hook token.
func (t *tokenChecker) headerHolds(h http.Header) bool {
	for name, vs := range h {
		if t.holds(name) || slices.ContainsFunc(vs, t.holds) {
			return true
		}
	}
	return false
}
