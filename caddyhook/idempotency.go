package caddyhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/idempotency"
	"go.uber.org/zap"
)

// provisionIdempotency loads (or creates) the idempotency cache of this
// handler's identity and TTL.
func (h *Handler) provisionIdempotency(identity string) error {
	ttl := time.Duration(h.IdempotencyTTL)
	key := idempotencyPoolPrefix + identity + "|" + ttl.String()
	c, _, err := hold(&h.held, key, func() (*idempotency.Cache, error) { return idempotency.New(ttl), nil })
	h.idem = c
	return err
}

// dispatchOnce dispatches the plan of a request with idempotency key key
// (seeds are its event ids) unless the key was answered already: a
// replay gets the first reply, from this node's cache or, with a
// cluster, from any node's; a concurrent duplicate waits for the first
// request (here) or is refused 409 (on another node). A failed dispatch
// is forgotten, so that the sender's retry dispatches again.
func (h *Handler) dispatchOnce(ex *exchange, p plan, key string, seeds []string) (int, []byte, *hookError) {
	cacheKey := key + "\x00" + strings.Join(seeds, ",")
	cached, claim, err := h.idem.Claim(ex.r.Context(), cacheKey, ex.now)
	if err != nil {
		return 0, nil, reject(http.StatusServiceUnavailable, "request cancelled")
	}
	if claim == nil {
		return cached.Status, cached.Body, nil
	}
	ctx := ex.r.Context()
	if h.cluster != nil { // the claim, a publish and the settle share about one timeout
		ctx = cluster.WithBudget(ctx, h.cluster.idem.BudgetFrom(time.Now()))
	}
	first, ccl, herr := h.clusterClaim(ctx, cacheKey)
	switch {
	case herr != nil:
		h.idem.Settle(claim, idempotency.Reply{}, false, time.Now())
		return 0, nil, herr
	case first != nil: // answered on another node (or before a restart)
		h.idem.Settle(claim, idempotency.Reply{Status: first.Status, Body: first.Body}, true, time.Now())
		return first.Status, first.Body, nil
	}
	status, body, herr := h.dispatch(ctx, ex, p, key, seeds)
	h.settleClusterClaim(ccl, status, body, herr == nil)
	h.idem.Settle(claim, idempotency.Reply{Status: status, Body: body}, herr == nil, time.Now())
	return status, body, herr
}

// idempotencyKey returns the request's idempotency key as the gateway
// reads it: the first of the Idempotency-Key header, the configured
// idempotency_headers and the idempotencyKey field that is, trimmed,
// non-empty and at most 256 characters (a longer one is ignored, not
// refused); else a signed provider's delivery id.
func (h *Handler) idempotencyKey(ex *exchange) string {
	for _, name := range h.idemHeaders {
		if v, ok := ex.r.Header[name]; ok {
			if key := usableIdemKey(strings.Join(v, ", ")); key != "" {
				return key
			}
		}
	}
	if s, ok := ex.payload["idempotencyKey"].(string); ok {
		if key := usableIdemKey(s); key != "" {
			return key
		}
	}
	return ex.deliveryID
}

// maxIdempotencyKeyLen bounds the Idempotency-Key header and field.
const maxIdempotencyKeyLen = 256

// usableIdemKey trims s and returns it when it is 1–256 UTF-16 code
// units long (the gateway's measure), else "".
func usableIdemKey(s string) string {
	s = jsTrim(s)
	if len(s) <= maxIdempotencyKeyLen {
		return s
	}
	if len(s) > 4*maxIdempotencyKeyLen {
		return ""
	}
	n := 0
	for _, r := range s {
		if n++; r > 0xFFFF {
			n++
		}
	}
	if n > maxIdempotencyKeyLen {
		return ""
	}
	return s
}

// clusterClaim resolves an idempotency key cluster-wide after the local
// cache made this request its key's leader on this node. It returns the
// first reply of the key (a replay, from any node), or the claim to
// settle after the dispatch (nil when the cluster cannot be asked: the
// local cache alone answers then), or the 409 for a key whose first
// request is still being dispatched elsewhere.
func (h *Handler) clusterClaim(ctx context.Context, key string) (*cluster.Reply, *cluster.Claim, *hookError) {
	if h.cluster == nil {
		return nil, nil, nil
	}
	rep, cl, err := h.cluster.idem.Acquire(ctx, key)
	switch {
	case err == nil:
		return rep, cl, nil
	case errors.Is(err, cluster.ErrBusy):
		return nil, nil, &hookError{status: http.StatusConflict, reason: "a request with this idempotency key is still being processed; retry later",
			retryAfter: clusterBusyRetryAfter}
	case ctx.Err() != nil:
		return nil, nil, reject(http.StatusServiceUnavailable, "request cancelled")
	}
	h.clusterLog("cluster idempotency unavailable; this node's own cache answers", err)
	return nil, nil, nil
}

// clusterLog writes a warning about the cluster, within the gateway log
// budget (a flood of requests while the cluster is down logs little).
func (h *Handler) clusterLog(msg string, err error) {
	if ok, suppressed := h.gatewayLogs.allow(time.Now()); ok {
		h.logger.Warn(msg, zap.Error(err), zap.Uint64("suppressed", suppressed))
	}
}

// settleClusterClaim stores the first reply of a claimed key (or gives
// the key up after a failed dispatch, so that a retry dispatches again),
// within the claim's budget: an engine that cannot store it in time (a
// stalled bucket leader) goes on in the background until the claim's
// lease ends, and the answer does not wait for it.
func (h *Handler) settleClusterClaim(cl *cluster.Claim, status int, body []byte, ok bool) {
	if cl == nil {
		return
	}
	var err error
	if ok {
		err = cl.Settle(status, body)
	} else {
		err = cl.Release()
	}
	if err != nil {
		h.clusterLog("cluster idempotency: the outcome is not stored yet; the engine retries until the claim's lease ends", err)
	}
}
