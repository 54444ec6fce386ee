package caddyhook

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// exchange is the per-request state of one hook request: what the
// request's steps learnt, each step writing its part and the later ones
// reading it. It is the one type every step of the request path shares.
type exchange struct {
	r       *http.Request
	w       http.ResponseWriter // nil in a dry run
	sub     string
	ip      netip.Addr
	now     time.Time
	tokenOK bool
	route   string // as in the metrics and logs: wake, agent, a mapping id, …
	mapping string // id of the mapping that answered, if any
	body    []byte
	// bodyBuf holds the buffer body is read into, from bodyBufs (serveHook
	// gives it back); nil, the body gets a buffer of its own.
	bodyBuf *[]byte
	payload map[string]any

	// verified lists the signing mappings' verifiers the request passed;
	// deliveryID and challenge come from the first that passed; sigReason
	// is the first verification failure.
	verified   []*verify.Verifier
	deliveryID string
	challenge  string
	sigReason  string

	// lockedFor is the rest of the client address's lock (0 = not locked);
	// a locked request only gets this far with a provider signature.
	lockedFor time.Duration
	// bodyDone is set once the whole body has been read.
	bodyDone bool
	// items are the gateway requests handed to the sink (the event log
	// records them).
	items []prepared

	// skip says why the request was answered 204: the mapping that took
	// it and why it produced nothing to dispatch. passed lists the
	// mappings that answer the hook name but did not take it, and why
	// ("github-push: match_expr false"); it is collected only when trace
	// is set (a dry run, or a router that logs at debug level).
	skip   string
	trace  bool
	passed []string

	// gwRest is the path below the base as the gateway reads it, for a
	// forwarded request (gatewayRest); gwOK says whether the gateway reads
	// the name the edge routed; gwDone that both are set.
	gwRest       string
	gwOK, gwDone bool
}

// reasonNoSignature answers a signed path's request that neither carries
// the hook token nor a valid signature and names no specific failure.
const reasonNoSignature = "invalid or missing signature"

// signatureReason is the 401 reason for a request whose signature failed.
func (ex *exchange) signatureReason() string {
	if ex.sigReason != "" {
		return ex.sigReason
	}
	return reasonNoSignature
}

// gatewayRest is gatewayRest of the request target below base, computed
// once: the path a forwarded request reaches the gateway with.
func (ex *exchange) gatewayRest(base string) (string, bool) {
	if !ex.gwDone {
		ex.gwRest, ex.gwOK = gatewayRest(requestTarget(ex.r), base)
		ex.gwDone = true
	}
	return ex.gwRest, ex.gwOK
}
