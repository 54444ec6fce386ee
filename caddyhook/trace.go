package caddyhook

import (
	"context"
	"net/http"
	"strings"
)

// maxTraceStateLen is the longest tracestate passed on (W3C: at least 512
// characters must be propagated; a longer one is dropped).
const maxTraceStateLen = 512

// traceContext is the W3C trace context of an accepted request, passed to
// the gateway with every dispatch of its actions (and stored with a
// spooled event). With Caddy's `tracing` directive on, the request's
// traceparent is already Caddy's own span, a child of the sender's.
type traceContext struct {
	parent string // traceparent; "" = none
	state  string // tracestate; only with a parent
}

// requestTrace reads the request's traceparent and tracestate, keeping
// them only when the traceparent is well formed.
func requestTrace(r *http.Request) traceContext {
	vals := r.Header["Traceparent"]
	if len(vals) != 1 || !validTraceParent(vals[0]) {
		return traceContext{}
	}
	tc := traceContext{parent: vals[0]}
	if st := strings.Join(r.Header["Tracestate"], ","); len(st) <= maxTraceStateLen && printableASCII(st) {
		tc.state = st
	}
	return tc
}

// validTraceParent checks the W3C form version-traceid-parentid-flags:
// lowercase hex, version not ff, ids not all zero; a future version may
// append fields after a dash.
func validTraceParent(s string) bool {
	const n = 55 // len("00-" + 32 + "-" + 16 + "-" + 2)
	if len(s) < n || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := s[:2], s[3:35], s[36:52], s[53:55]
	switch {
	case !lowerHex(version) || version == "ff" || !lowerHex(flags):
		return false
	case !lowerHex(traceID) || strings.Trim(traceID, "0") == "":
		return false
	case !lowerHex(parentID) || strings.Trim(parentID, "0") == "":
		return false
	case version == "00":
		return len(s) == n
	}
	return len(s) == n || s[n] == '-'
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// traceKey is the context key of a request's traceContext.
type traceKey struct{}

// withTrace returns ctx carrying tc for the gateway client.
func withTrace(ctx context.Context, tc traceContext) context.Context {
	if tc.parent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tc)
}

// traceFrom returns the trace context withTrace attached, if any.
func traceFrom(ctx context.Context) traceContext {
	tc, _ := ctx.Value(traceKey{}).(traceContext)
	return tc
}

// setHeaders adds tc to a gateway request's headers.
func (tc traceContext) setHeaders(h http.Header) {
	if tc.parent == "" {
		return
	}
	h["Traceparent"] = []string{tc.parent}
	if tc.state != "" {
		h["Tracestate"] = []string{tc.state}
	}
}
