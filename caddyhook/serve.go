package caddyhook

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// Request-path reasons.
const (
	reasonQueryToken  = "token must not be sent in the URL; use Authorization: Bearer <token> or x-service-token"
	reasonContentType = "content type must be application/json"
	reasonTooLarge    = "payload too large"
	reasonInvalidJSON = "invalid JSON body"
	reasonWaitSpooled = "waitForCompletion is not available with the spool: a spooled request is answered once it is on disk, before the run"
)

// exchange is the per-request state of one hook request.
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

	// gwRest is the path below the base as the gateway reads it, for a
	// forwarded request (gatewayRest); gwOK says whether the gateway reads
	// the name the edge routed; gwDone that both are set.
	gwRest       string
	gwOK, gwDone bool
}

// bodyPool recycles request body buffers.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// serveHook runs the request pipeline for a path under the base path and
// writes the answer.
func (h *Handler) serveHook(w http.ResponseWriter, r *http.Request, sub string) {
	takeOver := h.access.takeOver(r)
	bufp := bodyPool.Get().(*[]byte)
	ex := exchange{r: r, w: w, sub: sub, ip: h.clientAddress(r), now: time.Now(), body: (*bufp)[:0], route: "none"}
	status, body, herr := h.process(&ex)
	if !ex.bodyDone {
		settleUnreadBody(w, r)
	}
	if herr != nil {
		status = herr.status
	}
	setPlaceholders(r, &ex, status, herr)
	if herr != nil {
		writeError(w, herr)
		h.logRejection(&ex, herr)
	} else if status == http.StatusNoContent {
		writeNoContent(w)
	} else {
		writeJSON(w, status, body)
	}
	h.metrics.observeRequest(ex.route, status)
	h.recordEvent(&ex, status, body, herr)
	if takeOver {
		h.access.emit(r, status, len(body), ex.now)
	}
	if cap(ex.body) <= 64<<10 {
		*bufp = ex.body[:0]
		bodyPool.Put(bufp)
	}
}

// process is the pipeline of DESIGN.md, cheapest rejection first. It
// returns the success status and body, or the rejection.
func (h *Handler) process(ex *exchange) (int, []byte, *hookError) {
	r := ex.r
	if h.forward && !rawTargetOK(requestTarget(r)) {
		// what the gateway's HTTP parser refuses, before anything else
		return 0, nil, reject(http.StatusBadRequest, reasonRawTarget)
	}
	if h.urlToken(r) {
		return 0, nil, reject(http.StatusBadRequest, reasonQueryToken)
	}
	if herr := h.authenticate(ex); herr != nil {
		return 0, nil, herr
	}
	if ex.sub == "" {
		return 0, nil, reject(http.StatusNotFound, "no hook name")
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		return 0, nil, reject(http.StatusUnsupportedMediaType, reasonContentType)
	}
	if herr := h.readRequestBody(ex); herr != nil {
		return 0, nil, herr
	}
	if herr := h.verifySignature(ex); herr != nil {
		return 0, nil, herr
	}
	if ex.challenge != "" {
		ex.route = "challenge"
		return http.StatusOK, challengeReply(ex.challenge), nil
	}
	if herr := decodePayload(ex); herr != nil {
		return 0, nil, herr
	}
	p, herr := h.plan(ex)
	if herr != nil || p.skip {
		return http.StatusNoContent, nil, herr
	}
	return h.execute(ex, p)
}

// decodePayload parses the body as the gateway does: surrounding white
// space (and a UTF-8 byte order mark) is ignored, invalid JSON is 400, an
// empty body is {}, and so is any JSON value but an object (its fields,
// such as text or message, are then missing).
func decodePayload(ex *exchange) *hookError {
	body := trimJSSpace(ex.body)
	if len(body) == 0 {
		ex.payload = map[string]any{}
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return reject(http.StatusBadRequest, reasonInvalidJSON)
	}
	m, ok := v.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	ex.payload = m
	return nil
}

// plan is what a request resolved to: the actions to dispatch, how many a
// fan-out cap dropped, or a skip (204). A forwarded request has fwd set
// (fwd.name is not empty); its actions, if any, are the decoded /wake or
// /agent request, checked by the policy but not dispatched.
type plan struct {
	actions []action
	dropped int
	skip    bool
	fwd     forwardReq
}

// execute applies the policy, the idempotency cache and the dispatcher.
func (h *Handler) execute(ex *exchange, p plan) (int, []byte, *hookError) {
	key := h.idempotencyKey(ex)
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
		if a := &p.actions[0]; a.Kind == kindAgent && a.keySource == keyNone && a.SessionKey != "" {
			// the edge's own default_session_key, as the last member: it
			// wins over a sessionKey the policy read as none (null, "",
			// blank), which the gateway would otherwise read last; the
			// gateway resolves every other omitted field itself
			p.fwd.body = withField(p.fwd.body, "sessionKey", a.SessionKey)
		}
	}
	if h.Spool != nil && h.waits(p) {
		return 0, nil, reject(http.StatusBadRequest, reasonWaitSpooled)
	}
	if key == "" {
		return h.dispatch(ex.r.Context(), ex, p, "", nil)
	}
	return h.dispatchOnce(ex, p, key, seeds)
}

// waits reports whether p asks the gateway to answer when the run ends.
func (h *Handler) waits(p plan) bool {
	if p.fwd.name != "" {
		return p.fwd.wait
	}
	for i := range p.actions {
		if p.actions[i].Wait {
			return true
		}
	}
	return false
}

// dispatch prepares the gateway requests and hands them to the sink.
// key is the request's idempotency key; eventIDs, when given, are the
// deterministic ids of an idempotent request.
func (h *Handler) dispatch(ctx context.Context, ex *exchange, p plan, key string, eventIDs []string) (int, []byte, *hookError) {
	id := func(i int) string {
		if eventIDs == nil {
			return ""
		}
		return eventIDs[i]
	}
	ctx = withTrace(ctx, requestTrace(ex.r))
	if p.fwd.name != "" {
		ex.items = []prepared{h.prepareForward(ex, &p.fwd, id(0))}
		return h.sink.deliver(ctx, ex.items, 0, ex.ip)
	}
	items := make([]prepared, len(p.actions))
	for i := range p.actions {
		items[i] = h.prepare(&p.actions[i], id(i))
	}
	ex.items = items
	return h.sink.deliver(ctx, items, p.dropped, ex.ip)
}

// clientAddr is Caddy's resolved client IP (which honours the server's
// trusted_proxies), falling back to the peer address.
func clientAddr(r *http.Request) netip.Addr {
	if s, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
		if ip, err := netip.ParseAddr(s); err == nil {
			return ip
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, _ := netip.ParseAddr(host)
	return ip
}

// retryAfterSeconds rounds a remaining lock time up to whole seconds, ≥ 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}
