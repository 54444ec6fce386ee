package caddyhook

import (
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

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
	event   string // the event name its provider gave, if any
	body    []byte
	// bodyBuf holds the buffer body is read into, from bodyBufs (serveHook
	// gives it back); nil, the body gets a buffer of its own.
	bodyBuf *[]byte
	payload map[string]any

	// verified lists the signing mappings' verifiers the request passed,
	// and events the event name each gave (same order); deliveryID,
	// payloadJSON and ack come from the first that passed on a mapping the
	// request may use; sigReason is the first verification failure.
	verified   []*verify.Verifier
	events     []string
	deliveryID string
	sigReason  string
	// payloadJSON, when set, is the JSON the provider's body stands for
	// (a form's fields as one object, a decrypted or wrapped body): the
	// payload mappings see and forward mode sends instead of body.
	payloadJSON []byte
	// form: the body was sent as application/x-www-form-urlencoded to a
	// hook name whose provider posts forms.
	form bool
	// mayHandshake: the request may be a signing mapping's endpoint
	// handshake (router.mayHandshake).
	mayHandshake bool
	// ack is the answer the provider expects to an accepted request
	// (Discord's deferred response, Twilio's empty TwiML), written in
	// place of the edge's JSON reply.
	ack *verify.Answer
	// answer is a handshake's answer (route challenge): written as it is,
	// never dispatched; handshakeBy names the provider that answered (or
	// refused: a handshake that failed).
	answer      *verify.Answer
	handshakeBy string
	// vreq is the request as the verifiers see it (verifyRequest), vreqOK
	// once it is built.
	vreq   verify.Request
	vreqOK bool

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

// verifyRequest is the request as the verifiers see it, built once the
// body is read: the original request's URL (what the provider signed,
// before a rewrite or handle_path in front of the handler changed it;
// Caddy keeps its URL, not its Host, which no rewrite changes), the Host,
// whether it came over TLS or from a trusted proxy (whose forwarded
// scheme and host then describe the public URL), the headers and the raw
// body.
func (ex *exchange) verifyRequest() *verify.Request {
	if !ex.vreqOK {
		r := ex.r
		u := r.URL
		if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
			u = orig.URL
		}
		trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
		ex.vreq = verify.Request{Context: r.Context(), Method: r.Method, URL: u, Host: r.Host, TLS: r.TLS != nil,
			TrustedProxy: trusted, Header: r.Header, Body: ex.body}
		ex.vreqOK = true
	}
	return &ex.vreq
}

// eventOf is the event name verifier v gave the request ("" when v did
// not pass, or names none).
func (ex *exchange) eventOf(v *verify.Verifier) string {
	if i := slices.Index(ex.verified, v); i >= 0 {
		return ex.events[i]
	}
	return ""
}

// dispatchBody is the body the request stands for: the provider's JSON
// when its body is not JSON as sent (payloadJSON), else the body.
func (ex *exchange) dispatchBody() []byte {
	if ex.payloadJSON != nil {
		return ex.payloadJSON
	}
	return ex.body
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
