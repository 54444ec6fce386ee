package caddyhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/jsjson"
)

// The request path of one hook request, in order: the Handler runs each
// step through the concern that owns it (see ARCHITECTURE.md).

// Request-path reasons.
const (
	reasonNoClientAddr = "client address unknown (the proxy in front must send X-Forwarded-For)"
	reasonInvalidJSON  = "invalid JSON body"
	reasonWaitSpooled  = "waitForCompletion is not available with the spool: a spooled request is answered once it is on disk, before the run"
)

// ServeHTTP handles requests under the base path and passes every other
// request to next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !h.enabled {
		return next.ServeHTTP(w, r)
	}
	sub, ok := subPath(r.URL.Path, h.base)
	if h.forward {
		// a fragment or a backslash: route the name the gateway reads
		if s, gw := gatewaySub(requestTarget(r), h.base); gw {
			sub, ok = s, true
		}
	}
	if !ok {
		return next.ServeHTTP(w, r)
	}
	h.serveHook(w, r, sub)
	return nil
}

// serveHook runs the request pipeline for a path under the base path and
// writes the answer.
func (h *Handler) serveHook(w http.ResponseWriter, r *http.Request, sub string) {
	takeOver := h.access.takeOver(r)
	bufp := bodyBufs.get(0)
	ex := exchange{r: r, w: w, sub: sub, ip: h.addrs.address(r), now: time.Now(), body: (*bufp)[:0], bodyBuf: bufp, route: "none"}
	status, body, herr := h.process(&ex)
	if !ex.bodyDone {
		settleUnreadBody(w, r)
	}
	if herr != nil {
		status = herr.status
	}
	setPlaceholders(r, &ex, status, herr)
	answered, written := status, len(body)
	switch {
	case herr != nil:
		writeError(w, herr)
		h.rejects.write(&ex, herr)
	case ex.answer != nil:
		writeAnswer(w, ex.answer)
	case ex.ack != nil && status < http.StatusMultipleChoices:
		// the provider's acknowledgement of an accepted request, in place
		// of the edge's reply (which the event log and a replay keep)
		answered, written = ex.ack.Status, len(ex.ack.Body)
		writeAnswer(w, ex.ack)
	case status == http.StatusNoContent:
		writeNoContent(w)
	default:
		writeJSON(w, status, body)
	}
	if herr == nil && ex.answer == nil && status == http.StatusNoContent {
		h.rejects.skipped(&ex) // also under a provider's acknowledgement
	}
	h.metrics.observeRequest(ex.route, status)
	if h.events != nil {
		h.events.record(&ex, status, body, herr)
	}
	if takeOver {
		h.access.emit(r, answered, written, ex.now)
	}
	bodyBufs.put(bufp)
}

// process is the pipeline of DESIGN.md, cheapest rejection first. It
// returns the success status and body, or the rejection; a refusal that
// counts as an authentication failure is counted by the lockout here.
func (h *Handler) process(ex *exchange) (int, []byte, *hookError) {
	status, body, herr := h.steps(ex)
	return status, body, h.lockout.count(ex, herr)
}

// steps runs the request's steps, each through its concern.
func (h *Handler) steps(ex *exchange) (int, []byte, *hookError) {
	r := ex.r
	if h.forward && !rawTargetOK(requestTarget(r)) {
		// what the gateway's HTTP parser refuses, before anything else
		return 0, nil, reject(http.StatusBadRequest, reasonRawTarget)
	}
	if h.tokens.urlToken(r) {
		return 0, nil, reject(http.StatusBadRequest, reasonQueryToken)
	}
	if herr := h.authenticate(ex); herr != nil {
		return 0, nil, herr
	}
	if ex.sub == "" {
		return 0, nil, reject(http.StatusNotFound, "no hook name")
	}
	post := r.Method == http.MethodPost
	contentOK := post && h.router.contentOK(ex)
	if post && !contentOK && !ex.mayHandshake {
		return 0, nil, reject(http.StatusUnsupportedMediaType, reasonContentType)
	}
	if post { // a handshake's GET or HEAD has no body to read
		if herr := h.bodies.read(ex, h.router.bodyLimit(ex.sub), h.lockout); herr != nil {
			return 0, nil, herr
		}
	}
	if ex.mayHandshake {
		a, herr := h.router.handshake(ex)
		if ex.handshakeBy != "" {
			h.metrics.observeHandshake(ex.handshakeBy, herr)
		}
		if herr != nil {
			return 0, nil, herr
		}
		if a != nil {
			ex.answer = a
			return a.Status, a.Body, nil
		}
	}
	switch {
	case !post:
		return 0, nil, h.router.methodNotAllowed(ex)
	case !contentOK:
		return 0, nil, reject(http.StatusUnsupportedMediaType, reasonContentType)
	}
	if herr := h.router.verifySignature(ex); herr != nil {
		return 0, nil, herr
	}
	if ex.form && ex.payloadJSON == nil {
		// a form only a provider's verifier reads (as JSON)
		return 0, nil, reject(http.StatusUnsupportedMediaType, reasonContentType)
	}
	if herr := decodePayload(ex, h.forward); herr != nil {
		return 0, nil, herr
	}
	p, herr := h.router.plan(ex)
	if herr == nil && p.forwarded {
		p.fwd, herr = h.forwarder.plan(ex, p.actions, p.lane)
	}
	if herr != nil || p.skip {
		return http.StatusNoContent, nil, herr
	}
	return h.execute(ex, p)
}

// authenticate runs the steps before the body: the client address, the
// lockout, the method and the token. A locked address gets no token
// compared; it is answered 429 at once unless the hook name is a signed
// one and the request carries a signature header, which is then checked
// (never the token): a lock never blocks a valid provider signature, so a
// third party cannot lock a provider's shared address out. A request that
// neither has the token nor offers a signature is refused here, before its
// body is read, unless it may be a provider's endpoint handshake (some
// come unsigned: Meta's GET, Asana's X-Hook-Secret), which its provider
// authenticates once read. A method other than POST is taken only for
// such a handshake (405 otherwise).
func (h *Handler) authenticate(ex *exchange) *hookError {
	if !ex.ip.IsValid() {
		// behind a Unix socket without a forwarded address: no key to
		// count failures against, so nothing is evaluated
		return reject(http.StatusForbidden, reasonNoClientAddr)
	}
	if h.addrs.leftmost(ex.r) {
		return reject(http.StatusInternalServerError, reasonLeftmostForwarded)
	}
	signed := h.router.mayVerify(ex.sub) && h.router.signatureOffered(ex)
	if left, locked := h.lockout.Locked(ex.ip, ex.now); locked {
		if !signed {
			return lockedOut(left)
		}
		ex.lockedFor = left
	}
	ex.mayHandshake = h.router.mayHandshake(ex)
	if ex.r.Method != http.MethodPost {
		if !ex.mayHandshake {
			return h.router.methodNotAllowed(ex)
		}
		return nil // a handshake's GET or HEAD: the handshake authenticates it
	}
	if ex.lockedFor == 0 {
		ex.tokenOK = h.tokens.authorized(ex.r.Header)
	}
	switch {
	case ex.tokenOK:
		h.lockout.Reset(ex.ip)
	case !h.router.mayVerify(ex.sub):
		return unauthorized(reasonBadToken)
	case !signed && !ex.mayHandshake:
		return unauthorized(ex.signatureReason())
	}
	return nil
}

// decodePayload parses the body (or the JSON a provider's body stands
// for: a form's fields, a decrypted body) as the gateway does: surrounding white
// space (and a UTF-8 byte order mark) is ignored, invalid JSON is 400, an
// empty body is {}, and so is any JSON value but an object (its fields,
// such as text or message, are then missing). In forward mode the
// gateway's own JSON.parse reads the body after the edge: internal/jsjson
// reads it alike (any depth, numbers beyond float64 as ±Inf), so that the
// edge refuses exactly what the gateway refuses. In render mode the edge
// is the body's only reader and encoding/json's limits stand.
func decodePayload(ex *exchange, forward bool) *hookError {
	body := trimJSSpace(ex.dispatchBody())
	if len(body) == 0 {
		ex.payload = map[string]any{}
		return nil
	}
	var v any
	var err error
	if forward {
		v, err = jsjson.Decode(body)
	} else {
		err = json.Unmarshal(body, &v)
	}
	if err != nil {
		return reject(http.StatusBadRequest, reasonInvalidJSON)
	}
	m, ok := v.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	ex.payload = m
	return nil
}

// execute applies the policy, the idempotency check and the sink.
func (h *Handler) execute(ex *exchange, p plan) (int, []byte, *hookError) {
	key := h.idem.key(ex)
	var seeds []string
	if key != "" {
		// fingerprint the request as sent, before the policy fills in
		// generated values such as a fresh session key
		if p.fwd.name != "" {
			seeds = []string{p.fwd.seed(key)}
		} else {
			seeds = actionSeeds(key, p.actions)
		}
	}
	for i := range p.actions {
		if err := h.policy.Apply(&p.actions[i]); err != nil {
			return 0, nil, reject(http.StatusBadRequest, err.Error())
		}
	}
	if p.fwd.name != "" && len(p.actions) == 1 {
		p.fwd.withSessionKey(&p.actions[0])
	}
	if h.Spool != nil && p.waits() {
		return 0, nil, reject(http.StatusBadRequest, reasonWaitSpooled)
	}
	ctx := ex.r.Context()
	if key == "" {
		return h.dispatch(ctx, ex, p, nil)
	}
	// dispatch unless the key was answered already: a replay gets the
	// first reply; a failed dispatch gives the key up, so that the
	// sender's retry dispatches again
	cl, answered, status, body, herr := h.idem.claim(ex, key+"\x00"+strings.Join(seeds, ","))
	if answered {
		return status, body, herr
	}
	status, body, herr = h.dispatch(cl.context(ctx), ex, p, seeds)
	h.idem.settle(cl, status, body, herr == nil)
	return status, body, herr
}

// dispatch prepares the gateway requests and hands them to the sink.
// eventIDs, when given, are the deterministic ids of an idempotent
// request.
func (h *Handler) dispatch(ctx context.Context, ex *exchange, p plan, eventIDs []string) (int, []byte, *hookError) {
	id := func(i int) string {
		if eventIDs == nil {
			return ""
		}
		return eventIDs[i]
	}
	ctx = withTrace(ctx, requestTrace(ex.r))
	if p.fwd.name != "" {
		ex.items = []prepared{h.forwarder.prepare(ex, &p.fwd, id(0))}
		return h.sink.deliver(ctx, ex.items, 0, ex.ip)
	}
	items := make([]prepared, len(p.actions))
	for i := range p.actions {
		items[i] = prepare(&p.actions[i], id(i), h.wrapEdge, h.gateway)
	}
	ex.items = items
	return h.sink.deliver(ctx, items, p.dropped, ex.ip)
}
