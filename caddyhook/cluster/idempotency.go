package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Idempotency claims idempotency keys cluster-wide: the first request with
// a key dispatches, a replay on any node gets the first reply, and a
// concurrent duplicate waits for it.
type Idempotency struct {
	store   ClaimStore
	lease   time.Duration
	wait    time.Duration
	timeout time.Duration
	metrics *Metrics
}

// IdempotencyOptions tune an Idempotency.
type IdempotencyOptions struct {
	// Lease is how long a claim holds while its dispatch runs; a claim not
	// settled by then (its node died) may be taken over. It must exceed
	// the longest dispatch.
	Lease time.Duration
	// Wait bounds how long a duplicate waits for the first reply before
	// ErrBusy.
	Wait time.Duration
	// Timeout bounds one engine operation.
	Timeout time.Duration
	Metrics *Metrics
}

// NewIdempotency returns an Idempotency over store.
func NewIdempotency(store ClaimStore, opt IdempotencyOptions) *Idempotency {
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Second
	}
	if opt.Lease <= 0 {
		opt.Lease = 30 * time.Second
	}
	if opt.Wait <= 0 {
		opt.Wait = opt.Lease
	}
	return &Idempotency{store: store, lease: opt.Lease, wait: opt.Wait, timeout: opt.Timeout, metrics: opt.Metrics}
}

// Claim is a held key; exactly one of Settle or Release ends it.
type Claim struct {
	i      *Idempotency
	key    string
	budget time.Time // the request's cluster operations should be over by then (BudgetFrom)
}

// BudgetFrom is the time by which a request whose cluster operations
// start at start should be done with the cluster: one timeout and a
// quarter. A publish after a slow claim gets what is left of it (see
// WithBudget), whether the key was claimed or the claim failed, and so
// does Settle or Release, so that a request that met a stalled server on
// every operation is still answered within about one timeout.
func (i *Idempotency) BudgetFrom(start time.Time) time.Time {
	return start.Add(i.timeout + i.timeout/4)
}

// finishCtx bounds Settle or Release by the claim's budget, leaving them
// at least an eighth of the timeout (the engine goes on in the
// background when that is not enough).
func (c *Claim) finishCtx() (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), maxTime(c.budget, time.Now().Add(c.i.timeout/8)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Reply is a settled key's first reply.
type Reply struct {
	Status int
	Body   []byte
}

// Acquire resolves key: a settled reply (a replay), or a Claim (the
// caller dispatches, then settles), or an error: ErrBusy when a dispatch
// elsewhere holds the key past the wait deadline, ErrUnavailable when the
// engine cannot be asked (the caller then relies on its local cache). A
// key that cannot be read is unavailable, not busy: a copy that cannot
// see the first request's state must not be told that it is in progress.
func (i *Idempotency) Acquire(ctx context.Context, key string) (*Reply, *Claim, error) {
	k := storeKey(key)
	budget := i.BudgetFrom(time.Now())
	deadline := time.Now().Add(i.wait)
	for attempt := 0; ; attempt++ {
		opTimeout := i.timeout
		if attempt > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, nil, ErrBusy
			}
			opTimeout = min(opTimeout, left)
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		rec, claimed, err := i.store.Claim(cctx, k, start.Add(i.lease))
		cancel()
		i.metrics.observe("idempotency_claim", start, err)
		if err != nil {
			return nil, nil, unavailable(err)
		}
		if claimed {
			return nil, &Claim{i: i, key: k, budget: budget}, nil
		}
		if !rec.Pending {
			return &Reply{Status: rec.Status, Body: rec.Body}, nil, nil
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		rec, ok, err := i.store.Wait(wctx, k)
		waitedOut := errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		switch {
		case ok:
			return &Reply{Status: rec.Status, Body: rec.Body}, nil, nil
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case waitedOut || !time.Now().Before(deadline):
			return nil, nil, ErrBusy
		case err != nil:
			return nil, nil, unavailable(err)
		}
		// released or lapsed: compete for the key again
	}
}

// Settle stores the first reply for the key, within the claim's budget
// (an engine that cannot in time goes on in the background).
func (c *Claim) Settle(status int, body []byte) error {
	ctx, cancel := c.finishCtx()
	defer cancel()
	start := time.Now()
	err := c.i.store.Settle(ctx, c.key, status, body)
	c.i.metrics.observe("idempotency_settle", start, err)
	return err
}

// Release gives the key up after a failed dispatch, within the claim's
// budget as Settle.
func (c *Claim) Release() error {
	ctx, cancel := c.finishCtx()
	defer cancel()
	start := time.Now()
	err := c.i.store.Release(ctx, c.key)
	c.i.metrics.observe("idempotency_release", start, err)
	return err
}

// storeKey turns any idempotency key into a fixed-size, engine-safe key.
func storeKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// unavailable wraps err as ErrUnavailable unless it already says more.
func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrFull) || errors.Is(err, ErrUnconfirmed) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}
