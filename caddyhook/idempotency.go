package caddyhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/idempotency"
)

// idempotencyCheck answers a replay of an idempotent request with its
// first reply: it reads the request's key as the gateway does, holds the
// local cache (shared across reloads by the handlers of one identity; its
// methods Len and TTL are the check's) and, in a cluster, claims the key
// cluster-wide.
type idempotencyCheck struct {
	*idempotency.Cache
	// headers are the canonical idempotency header names, in order.
	headers []string
	cluster *cluster.Idempotency // nil without a cluster engine
	logs    *logBudget           // the cluster warnings' (shared with the gateway failures)
	logger  *zap.Logger
}

// holdIdempotencyCache loads (or creates) the idempotency cache of
// identity and ttl.
func holdIdempotencyCache(held *poolHold, identity string, ttl time.Duration) (*idempotency.Cache, error) {
	key := idempotencyPoolPrefix + identity + "|" + ttl.String()
	c, _, err := hold(held, key, func() (*idempotency.Cache, error) { return idempotency.New(ttl), nil })
	return c, err
}

// idemClaim is a request's claim of its key: the local one and, in a
// cluster, the cluster-wide one (nil when the cluster cannot be asked).
type idemClaim struct {
	local   *idempotency.Claim
	cluster *cluster.Claim
	budget  time.Time // with a cluster: when its operations should be over
}

// context is ctx carrying the claim's budget for the dispatch (a publish
// into the cluster queue gets what the claim left of it).
func (cl idemClaim) context(ctx context.Context) context.Context {
	if cl.budget.IsZero() {
		return ctx
	}
	return cluster.WithBudget(ctx, cl.budget)
}

// claim claims key (the request's key and event ids) for ex, unless it
// was answered already: a replay gets the first reply (first is set),
// from this node's cache or, with a cluster, from any node's; a
// concurrent duplicate waits for the first request (here) or is refused
// 409 (on another node). The caller dispatches on a claim and settles it.
func (c *idempotencyCheck) claim(ex *exchange, key string) (cl idemClaim, first bool, status int, body []byte, herr *hookError) {
	ctx := ex.r.Context()
	cached, local, err := c.Claim(ctx, key, ex.now)
	if err != nil {
		return cl, true, 0, nil, reject(http.StatusServiceUnavailable, "request cancelled")
	}
	if local == nil {
		return cl, true, cached.Status, cached.Body, nil
	}
	var budget time.Time // the claim, a publish and the settle share about one timeout
	if c.cluster != nil {
		budget = c.cluster.BudgetFrom(time.Now())
	}
	rep, ccl, herr := c.clusterClaim(ctx, key)
	switch {
	case herr != nil:
		c.Settle(local, idempotency.Reply{}, false, time.Now())
		return cl, true, 0, nil, herr
	case rep != nil: // answered on another node (or before a restart)
		c.Settle(local, idempotency.Reply{Status: rep.Status, Body: rep.Body}, true, time.Now())
		return cl, true, rep.Status, rep.Body, nil
	}
	return idemClaim{local: local, cluster: ccl, budget: budget}, false, 0, nil, nil
}

// settle stores the reply of a claimed key, or gives the key up after a
// failed dispatch (ok false), so that the sender's retry dispatches again.
func (c *idempotencyCheck) settle(cl idemClaim, status int, body []byte, ok bool) {
	c.settleCluster(cl.cluster, status, body, ok)
	c.Settle(cl.local, idempotency.Reply{Status: status, Body: body}, ok, time.Now())
}

// key returns the request's idempotency key as the gateway reads it: the
// first of the Idempotency-Key header, the configured idempotency_headers
// and the idempotencyKey field that is, trimmed, non-empty and at most 256
// characters (a longer one is ignored, not refused); else a signed
// provider's delivery id.
func (c *idempotencyCheck) key(ex *exchange) string {
	for _, name := range c.headers {
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
func (c *idempotencyCheck) clusterClaim(ctx context.Context, key string) (*cluster.Reply, *cluster.Claim, *hookError) {
	if c.cluster == nil {
		return nil, nil, nil
	}
	rep, cl, err := c.cluster.Acquire(ctx, key)
	switch {
	case err == nil:
		return rep, cl, nil
	case errors.Is(err, cluster.ErrBusy):
		return nil, nil, &hookError{status: http.StatusConflict, reason: "a request with this idempotency key is still being processed; retry later",
			retryAfter: clusterBusyRetryAfter}
	case ctx.Err() != nil:
		return nil, nil, reject(http.StatusServiceUnavailable, "request cancelled")
	}
	c.warn("cluster idempotency unavailable; this node's own cache answers", err)
	return nil, nil, nil
}

// warn writes a warning about the cluster, within the gateway log budget
// (a flood of requests while the cluster is down logs little).
func (c *idempotencyCheck) warn(msg string, err error) {
	if ok, suppressed := c.logs.allow(time.Now()); ok {
		c.logger.Warn(msg, zap.Error(err), zap.Uint64("suppressed", suppressed))
	}
}

// settleCluster stores the first reply of a claimed key (or gives the
// key up after a failed dispatch, so that a retry dispatches again),
// within the claim's budget: an engine that cannot store it in time (a
// stalled bucket leader) goes on in the background until the claim's
// lease ends, and the answer does not wait for it.
func (c *idempotencyCheck) settleCluster(cl *cluster.Claim, status int, body []byte, ok bool) {
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
		c.warn("cluster idempotency: the outcome is not stored yet; the engine retries until the claim's lease ends", err)
	}
}
