package caddyhook

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// hookError is a request-path rejection: the status the caller gets and a
// precise reason. Reasons never contain tokens or payload content.
type hookError struct {
	status     int
	reason     string
	retryAfter time.Duration // 429 and 503: sent as Retry-After
	// body, when set, is the gateway's own JSON answer, sent as it is.
	body []byte
}

func (e *hookError) Error() string { return e.reason }

// reject returns a hookError for status and reason.
func reject(status int, reason string) *hookError {
	return &hookError{status: status, reason: reason}
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
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusRequestEntityTooLarge:
		w.Header().Set("Connection", "close") // the rest of the body is not read
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

// Plain-text bodies of the plainStatus answers: the status text and a
// newline, built once (rejection floods are answered with these).
var (
	bodyUnauthorized     = []byte(http.StatusText(http.StatusUnauthorized) + "\n")
	bodyNotFound         = []byte(http.StatusText(http.StatusNotFound) + "\n")
	bodyMethodNotAllowed = []byte(http.StatusText(http.StatusMethodNotAllowed) + "\n")
	bodyTooManyRequests  = []byte(http.StatusText(http.StatusTooManyRequests) + "\n")
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
	return []byte(http.StatusText(status) + "\n")
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaping like
// JSON.stringify (no HTML escaping) and replacing invalid UTF-8 with U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
