package caddyhook

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyhook/caddyhook/caddyhook/verify"
)

// Request-path reasons.
const (
	reasonQueryToken  = "token must not be sent in the query string; use Authorization: Bearer <token> or x-service-token"
	reasonContentType = "content type must be application/json"
	reasonTooLarge    = "payload too large"
	reasonInvalidJSON = "invalid JSON body"
	reasonNotObject   = "body must be a JSON object"
	reasonIdemKeyLong = "idempotencyKey must be at most 256 characters"
)

// exchange is the per-request state of one hook request.
type exchange struct {
	r       *http.Request
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
}

// bodyPool recycles request body buffers.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// serveHook runs the request pipeline for a path under the base path and
// writes the answer.
func (h *Handler) serveHook(w http.ResponseWriter, r *http.Request, sub string) {
	takeOver := h.access.takeOver(r)
	bufp := bodyPool.Get().(*[]byte)
	ex := exchange{r: r, sub: sub, ip: clientAddr(r), now: time.Now(), body: (*bufp)[:0], route: "none"}
	status, body, herr := h.process(&ex)
	if herr != nil {
		status = herr.status
	}
	setPlaceholders(r, &ex, status, herr)
	if herr != nil {
		writeError(w, herr)
		h.logRejection(&ex, herr)
	} else if status == http.StatusNoContent {
		w.WriteHeader(status)
	} else {
		writeJSON(w, status, body)
	}
	h.metrics.observeRequest(ex.route, status)
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
	if queryHasToken(r.URL.RawQuery) {
		return 0, nil, reject(http.StatusBadRequest, reasonQueryToken)
	}
	if left, locked := h.lockout.Locked(ex.ip, ex.now); locked {
		return 0, nil, &hookError{status: http.StatusTooManyRequests, reason: "locked out", retryAfter: left}
	}
	if r.Method != http.MethodPost {
		return 0, nil, reject(http.StatusMethodNotAllowed, "method not allowed")
	}
	ex.tokenOK = tokenMatches(presentedToken(r.Header), &h.token)
	if !ex.tokenOK && !h.mayVerify(ex.sub) {
		return 0, nil, h.authFailed(ex, "invalid or missing token")
	}
	if ex.tokenOK {
		h.lockout.Reset(ex.ip)
	}
	if ex.sub == "" {
		return 0, nil, reject(http.StatusNotFound, "no hook name")
	}
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		return 0, nil, reject(http.StatusUnsupportedMediaType, reasonContentType)
	}
	var err error
	if ex.body, err = readBody(r, h.bodyLimit(ex.sub), ex.body); err == errBodyTooLarge {
		return 0, nil, reject(http.StatusRequestEntityTooLarge, reasonTooLarge)
	} else if err != nil {
		return 0, nil, reject(http.StatusBadRequest, "could not read body")
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

// authFailed records a failed authentication and returns the 401.
func (h *Handler) authFailed(ex *exchange, reason string) *hookError {
	h.metrics.authFailures.Inc()
	if h.lockout.Fail(ex.ip, ex.now) {
		h.logger.Warn("client locked out after repeated auth failures",
			zap.String("client_ip", ex.ip.String()),
			zap.Int("failures", h.AuthFailures.Count),
			zap.Duration("window", time.Duration(h.AuthFailures.Window)))
		if left, locked := h.lockout.Locked(ex.ip, ex.now); locked {
			h.events.lockedOut(ex.ip, ex.now.Add(left), h.base)
		}
	}
	return reject(http.StatusUnauthorized, reason)
}

// decodePayload parses the body: empty is {}, anything but an object is 400.
func decodePayload(ex *exchange) *hookError {
	if len(ex.body) == 0 {
		ex.payload = map[string]any{}
		return nil
	}
	var v any
	if err := json.Unmarshal(ex.body, &v); err != nil {
		return reject(http.StatusBadRequest, reasonInvalidJSON)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return reject(http.StatusBadRequest, reasonNotObject)
	}
	ex.payload = m
	return nil
}

// plan is what a request resolved to: the actions to dispatch, how many a
// fan-out cap dropped, or a skip (204).
type plan struct {
	actions []Action
	dropped int
	skip    bool
}

// execute applies the policy, the idempotency cache and the dispatcher.
func (h *Handler) execute(ex *exchange, p plan) (int, []byte, *hookError) {
	key, herr := idempotencyKey(ex)
	if herr != nil {
		return 0, nil, herr
	}
	var seeds []string
	if key != "" {
		// fingerprint the actions as requested, before the policy fills in
		// generated values such as a fresh session key
		seeds = actionSeeds(key, p.actions)
	}
	for i := range p.actions {
		if err := h.policy.Apply(&p.actions[i]); err != nil {
			return 0, nil, reject(http.StatusBadRequest, err.Error())
		}
	}
	if key == "" {
		return h.dispatch(ex.r.Context(), ex, p, nil)
	}
	cacheKey := key + "\x00" + strings.Join(seeds, ",")
	cached, claim, err := h.idem.claim(ex.r.Context(), cacheKey, ex.now)
	if err != nil {
		return 0, nil, reject(http.StatusServiceUnavailable, "request cancelled")
	}
	if claim == nil {
		return cached.status, cached.body, nil
	}
	status, body, herr := h.dispatch(ex.r.Context(), ex, p, seeds)
	h.idem.settle(claim, idemReply{status: status, body: body}, herr == nil, time.Now())
	return status, body, herr
}

// idempotencyKey reads the Idempotency-Key header or idempotencyKey field.
func idempotencyKey(ex *exchange) (string, *hookError) {
	key := ex.r.Header.Get("Idempotency-Key")
	if key == "" {
		key, _ = ex.payload["idempotencyKey"].(string)
	}
	if key == "" {
		key = ex.deliveryID // a signed provider's delivery id
	}
	if len(key) > maxIdempotencyKeyLen {
		return "", reject(http.StatusBadRequest, reasonIdemKeyLong)
	}
	return key, nil
}

// dispatch prepares the gateway bodies and hands them to the gateway.
// eventIDs, when given, are the deterministic ids of an idempotent request.
func (h *Handler) dispatch(ctx context.Context, ex *exchange, p plan, eventIDs []string) (int, []byte, *hookError) {
	items := make([]prepared, len(p.actions))
	for i := range p.actions {
		id := ""
		if eventIDs != nil {
			id = eventIDs[i]
		}
		items[i] = prepare(&p.actions[i], id)
	}
	ctx = withTrace(ctx, requestTrace(ex.r))
	return h.sink.deliver(ctx, items, p.dropped, ex.ip)
}

// sink is where prepared actions go: the gateway now (sync), the spool,
// or a dry run. It also composes the caller's reply.
type sink interface {
	deliver(ctx context.Context, items []prepared, dropped int, ip netip.Addr) (int, []byte, *hookError)
}

// logRejection writes one line per rejection: status, reason, client
// address and route; never a token or payload content. Lockout 429s are
// logged at debug so a locked attacker cannot flood the log, and at most
// rejectLogsPerSecond lines a second are written, the next one saying how
// many were left out.
func (h *Handler) logRejection(ex *exchange, herr *hookError) {
	lvl := zapcore.InfoLevel
	if herr.status == http.StatusTooManyRequests {
		lvl = zapcore.DebugLevel
	}
	if !h.logger.Core().Enabled(lvl) {
		return
	}
	ok, suppressed := h.rejectLogs.allow(ex.now)
	if !ok {
		return // before Check: a suppressed line costs two atomic adds
	}
	ce := h.logger.Check(lvl, "hook request rejected")
	if ce == nil {
		return
	}
	fields := []zap.Field{
		zap.Int("status", herr.status),
		zap.String("reason", herr.reason),
		zap.String("client_ip", ex.ip.String()),
		zap.String("route", ex.route),
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed", suppressed))
	}
	ce.Write(fields...)
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
