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
)

// headerServiceToken is the alternative token header.
const headerServiceToken = "X-Service-Token"

// queryHasToken reports whether any query parameter is named token
// (case-insensitively), without allocating for queries that have none.
func queryHasToken(raw string) bool {
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		key, _, _ := strings.Cut(part, "=")
		if len(key) < 5 {
			continue
		}
		if strings.EqualFold(key, "token") {
			return true
		}
		if strings.Contains(key, "%") {
			if k, err := url.QueryUnescape(key); err == nil && strings.EqualFold(strings.TrimSpace(k), "token") {
				return true
			}
		}
	}
	return false
}

// tokenDigest is the SHA-256 of a token; comparing digests in constant time
// makes the comparison independent of the presented token's length.
type tokenDigest [sha256.Size]byte

// presentedToken extracts the token from Authorization: Bearer (scheme
// case-insensitive) or x-service-token; "" when neither carries one.
func presentedToken(h http.Header) string {
	if v := h.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			if t := strings.TrimSpace(v[7:]); t != "" {
				return t
			}
		}
	}
	return strings.TrimSpace(h.Get(headerServiceToken))
}

// tokenMatches compares the presented token with want in constant time.
func tokenMatches(presented string, want *tokenDigest) bool {
	if presented == "" {
		return false
	}
	got := tokenDigest(sha256.Sum256([]byte(presented)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
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
