package caddyhook

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyhook/caddyhook/internal/jsonenc"
)

// hookError is a request-path rejection: the status the caller gets and a
// precise reason. Reasons never contain tokens or payload content.
type hookError struct {
	status     int
	reason     string
	retryAfter time.Duration // 429 and 503: sent as Retry-After
	// body, when set, is the gateway's own JSON answer, sent as it is.
	body []byte
	// counts marks an authentication failure that the lockout counts
	// against the request's address before it is the answer
	// (lockoutGuard.count, applied by the handler's pipeline).
	counts bool
	// allow is a 405's Allow header ("" = POST).
	allow string
}

func (e *hookError) Error() string { return e.reason }

// reject returns a hookError for status and reason.
func reject(status int, reason string) *hookError {
	return &hookError{status: status, reason: reason}
}

// authFailure returns a hookError for status and reason that counts as
// an authentication failure of the request's address.
func authFailure(status int, reason string) *hookError {
	return &hookError{status: status, reason: reason, counts: true}
}

// unauthorized is the 401 authentication failure with reason.
func unauthorized(reason string) *hookError { return authFailure(http.StatusUnauthorized, reason) }

// retryAfterSeconds rounds a remaining lock time up to whole seconds, ≥ 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}

// plainStatus lists the statuses answered with a plain-text body, as the
// reference gateway does; every other error has a JSON body.
func plainStatus(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusTooManyRequests:
		return true
	}
	return false
}

// writeError writes e in the shape the spec's status wants.
func writeError(w http.ResponseWriter, e *hookError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(e.retryAfter))
	}
	switch e.status {
	case http.StatusMethodNotAllowed:
		allow := e.allow
		if allow == "" {
			allow = http.MethodPost
		}
		w.Header().Set("Allow", allow)
	}
	if e.body != nil {
		writeJSON(w, e.status, e.body)
		return
	}
	if plainStatus(e.status) {
		h := w.Header()
		h["Content-Type"] = textContentType[:1:1]
		h["X-Content-Type-Options"] = nosniff[:1:1]
		w.WriteHeader(e.status)
		_, _ = w.Write(plainBody(e.status))
		return
	}
	body := make([]byte, 0, 32+len(e.reason))
	body = append(body, `{"ok":false,"error":`...)
	body = appendJSONString(body, e.reason)
	body = append(body, '}')
	writeJSON(w, e.status, body)
}

// writeJSON writes a JSON body with its length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = nosniff[:1:1]
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeNoContent writes a 204.
func writeNoContent(w http.ResponseWriter) {
	w.Header()["X-Content-Type-Options"] = nosniff[:1:1]
	w.WriteHeader(http.StatusNoContent)
}

// Header values shared by every answer; a handler after this one that
// appends to them gets a copy, as their capacity is their length.
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	textContentType = []string{"text/plain; charset=utf-8"}
	nosniff         = []string{"nosniff"}
)

// Plain-text bodies of the plainStatus answers: the status text, as the
// gateway answers them (no newline), built once (rejection floods are
// answered with these).
var (
	bodyUnauthorized     = []byte(http.StatusText(http.StatusUnauthorized))
	bodyNotFound         = []byte(http.StatusText(http.StatusNotFound))
	bodyMethodNotAllowed = []byte(http.StatusText(http.StatusMethodNotAllowed))
	bodyTooManyRequests  = []byte(http.StatusText(http.StatusTooManyRequests))
)

// plainBody returns the plain-text body for status.
func plainBody(status int) []byte {
	switch status {
	case http.StatusUnauthorized:
		return bodyUnauthorized
	case http.StatusNotFound:
		return bodyNotFound
	case http.StatusMethodNotAllowed:
		return bodyMethodNotAllowed
	case http.StatusTooManyRequests:
		return bodyTooManyRequests
	}
	return []byte(http.StatusText(status))
}

// appendJSONString appends s quoted as JSON.stringify quotes it.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }
