package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// Limiter paces a delivery node's sends to the gateway.
type Limiter interface {
	// Limited reports whether Acquire may wait (a rate is set).
	Limited() bool
	// Acquire waits until a send may start and reserves it; done(true)
	// records that the send started (now), done(false) gives the
	// reservation back. An error is ctx's.
	Acquire(ctx context.Context) (done func(sent bool), err error)
}

// rateSettle is how long a delivery node that just announced itself
// waits before its first send under a rate, so that it has heard the
// other delivery nodes (they answer its announcement at once) and they
// it: its share is then computed over the same members as theirs.
const rateSettle = 250 * time.Millisecond

// RateShare is this delivery node's share of a cluster-wide delivery
// rate: of a rate of n sends per interval, each of the d live delivery
// nodes (announced on TopicDelivery) may start n/d in any window of the
// interval, the first n mod d of them (ordered by member id) one more,
// so that the shares add up to exactly n. A node joining or leaving
// changes the shares as soon as the others hear of it (a node that stops
// says so; one that dies is forgotten after three announcement
// intervals, its share unused meanwhile).
type RateShare struct {
	members *Members
	metrics *Metrics
	name    string

	mu       sync.Mutex
	rate     spool.Rate
	starts   []time.Time // this node's sends within the last interval, oldest first
	reserved int
	readyAt  time.Time
	changed  chan struct{} // closed (and replaced) when the share may have grown
}

// NewRateShare returns the share of b's delivery nodes; Start announces
// this node as one of them.
func NewRateShare(b Backend, interval time.Duration, metrics *Metrics) *RateShare {
	r := &RateShare{metrics: metrics, name: b.Name(), changed: make(chan struct{})}
	r.members = NewMembers(b, TopicDelivery, interval, r.onMembers)
	return r
}

// Start announces this node as a delivery node.
func (r *RateShare) Start() error {
	r.mu.Lock()
	r.readyAt = time.Now().Add(rateSettle)
	r.mu.Unlock()
	if err := r.members.Start(); err != nil {
		return err
	}
	r.onMembers()
	return nil
}

// Close says that this node stops delivering.
func (r *RateShare) Close() {
	r.members.Close()
	r.metrics.setMembers(r.name, "delivery", 0)
}

// SetRate sets the cluster-wide rate (the zero Rate: unlimited), keeping
// the recent sends.
func (r *RateShare) SetRate(rate spool.Rate) {
	r.mu.Lock()
	r.rate = rate
	r.wakeLocked()
	r.mu.Unlock()
}

// wakeLocked wakes every waiter of Acquire; r.mu is held.
func (r *RateShare) wakeLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Limited implements Limiter.
func (r *RateShare) Limited() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.rate.Unlimited()
}

// Nodes is the number of live delivery nodes this one sees, itself
// included.
func (r *RateShare) Nodes() int { return r.members.Count() }

// share is this node's count per interval; r.mu is held.
func (r *RateShare) share() int {
	rank, n := r.members.Rank()
	s := r.rate.Count / n
	if rank < r.rate.Count%n {
		s++
	}
	return s
}

// Acquire implements Limiter.
func (r *RateShare) Acquire(ctx context.Context) (func(bool), error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.mu.Lock()
		if r.rate.Unlimited() {
			r.mu.Unlock()
			return func(bool) {}, nil
		}
		now := time.Now()
		wait := r.readyAt.Sub(now)
		if wait <= 0 {
			cut := 0
			for cut < len(r.starts) && now.Sub(r.starts[cut]) >= r.rate.Interval {
				cut++
			}
			r.starts = r.starts[cut:]
			if len(r.starts)+r.reserved < r.share() {
				r.reserved++
				r.mu.Unlock()
				return r.done, nil
			}
			// until the oldest send leaves the window, or a reservation is
			// given back, or the members change (no share at all: more
			// nodes than sends per interval)
			wait = time.Hour
			if len(r.starts) > 0 {
				wait = r.starts[0].Add(r.rate.Interval).Sub(now)
			}
		}
		changed := r.changed
		r.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
			t.Stop()
		case <-t.C:
		}
	}
}

// done ends a reservation of Acquire.
func (r *RateShare) done(sent bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved--
	if sent {
		r.starts = append(r.starts, time.Now())
	} else {
		r.wakeLocked()
	}
}

// onMembers recomputes the share (the waiters look again).
func (r *RateShare) onMembers() {
	r.metrics.setMembers(r.name, "delivery", r.members.Count())
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
}
