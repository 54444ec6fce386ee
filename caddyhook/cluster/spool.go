package cluster

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// Spool accepts events into the replicated queue and, while the engine is
// unreachable, into an optional local fallback spool that drains into the
// queue (deduplicated by event id) once it is back.
type Spool struct {
	b        Backend
	q        QueueStore
	fallback *spool.Store
	timeout  time.Duration
	metrics  *Metrics

	mu       sync.Mutex
	delivers *RateShare // while this node delivers: its share of the rate
	rate     spool.Rate
}

// SpoolOptions tune a Spool.
type SpoolOptions struct {
	// Fallback, when set, takes the events the queue cannot; nil: Append
	// fails with ErrUnavailable instead (the caller answers 503). Its
	// sender must be Drain(), which moves its events into the queue.
	Fallback *spool.Store
	// Timeout bounds one publish (the wait for the engine's
	// acknowledgement); default the backend's Timeout.
	Timeout time.Duration
	Metrics *Metrics
}

// NewSpool returns the cluster spool of b, whose Queue must be set.
func NewSpool(b Backend, opt SpoolOptions) (*Spool, error) {
	q := b.Queue()
	if q == nil {
		return nil, errors.New("cluster backend has no queue")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = b.Timeout()
	}
	return &Spool{b: b, q: q, fallback: opt.Fallback, timeout: opt.Timeout, metrics: opt.Metrics}, nil
}

// Drain is the fallback spool's sender: each delivery publishes the event
// into the queue (deduplicated by its id), retried with the fallback's
// backoff while the engine is unreachable.
func (s *Spool) Drain() spool.Sender { return drainSender{s} }

// Queue returns the replicated queue (dead letters, stats).
func (s *Spool) Queue() QueueStore { return s.q }

// Fallback returns the local fallback spool (nil when rejecting).
func (s *Spool) Fallback() *spool.Store { return s.fallback }

// Append stores evs durably: in the queue with the engine's acknowledgement,
// or, when the engine is unreachable or does not confirm in time, in the
// fallback. It reports whether the fallback took them. ErrFull and
// ErrUnavailable (no fallback) mean nothing was accepted and the caller
// answers 503; ErrUnconfirmed (no fallback) that the events were sent but
// not acknowledged, so they may be delivered: the caller must not say
// "not accepted".
func (s *Spool) Append(ctx context.Context, evs ...*spool.Event) (fellBack bool, err error) {
	if s.b.Up() {
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, s.publishTimeout(ctx))
		err = s.q.Publish(pctx, evs...)
		cancel()
		s.metrics.observe("publish", start, err)
		if err == nil || errors.Is(err, ErrFull) || errors.Is(err, ErrTooLarge) || ctx.Err() != nil {
			// too large: not into the fallback either, whose drain could
			// never move it into the queue
			return false, err
		}
	} else {
		err = ErrUnavailable
	}
	if s.fallback == nil {
		return false, unavailable(err)
	}
	// Some of evs may be in the queue already (an acknowledgement lost):
	// the drain republishes them under the same ids, which the queue drops.
	if err := s.fallback.Append(ctx, evs...); err != nil {
		return false, err
	}
	s.metrics.fallback(len(evs))
	return true, nil
}

// budgetKey is the context key of WithBudget.
type budgetKey struct{}

// WithBudget returns ctx carrying the time by which a request's cluster
// operations should be over: a publish that follows a slow idempotency
// claim (the bucket's leader stalled) gets what is left of it, at least a
// quarter of the timeout, then falls back, so that the request is
// answered within about one timeout however many operations it needs.
func WithBudget(ctx context.Context, until time.Time) context.Context {
	return context.WithValue(ctx, budgetKey{}, until)
}

// publishTimeout bounds one publish under ctx's budget.
func (s *Spool) publishTimeout(ctx context.Context) time.Duration {
	t := s.timeout
	if until, ok := ctx.Value(budgetKey{}).(time.Time); ok {
		t = min(t, max(time.Until(until), s.timeout/4))
	}
	return t
}

// SetSender makes this node a delivery node (nil: stop delivering here);
// workers goroutines, one of them for the ordered wake lane. A delivery
// node announces itself to the others, so that each takes its share of
// the cluster-wide rate.
func (s *Spool) SetSender(snd spool.Sender, workers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if snd == nil {
		s.q.SetSender(nil, 0)
		s.q.SetLimiter(nil)
		if s.delivers != nil {
			s.delivers.Close()
			s.delivers = nil
		}
		return
	}
	if s.delivers == nil {
		rs := NewRateShare(s.b, 0, s.metrics)
		rs.SetRate(s.rate)
		// a node that cannot announce itself shares the rate with nobody
		// it has not heard of: the whole rate alone, rather than nothing
		_ = rs.Start()
		s.delivers = rs
		s.q.SetLimiter(rs)
	}
	s.q.SetSender(countingSender{snd, s.metrics}, workers)
}

// SetRate sets the cluster-wide delivery rate (the zero Rate: none); this
// node delivers its share of it.
func (s *Spool) SetRate(r spool.Rate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = r
	if s.delivers != nil {
		s.delivers.SetRate(r)
	}
}

// Rate is the cluster-wide delivery rate this node applies its share of.
func (s *Spool) Rate() spool.Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate
}

// DeliveryNodes is the number of live delivery nodes this one sees,
// itself included (0 while it does not deliver).
func (s *Spool) DeliveryNodes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delivers == nil {
		return 0
	}
	return s.delivers.Nodes()
}

// countingSender counts the attempts that will be redelivered.
type countingSender struct {
	spool.Sender
	m *Metrics
}

// Send implements spool.Sender.
func (c countingSender) Send(ctx context.Context, ev *spool.Event) (int, string, error) {
	status, reason, err := c.Sender.Send(ctx, ev)
	if spool.Classify(status, err) == spool.OutcomeRetry && ctx.Err() == nil {
		c.m.redelivered()
	}
	return status, reason, err
}

// HeldSince implements spool.Holder for the sender it counts for.
func (c countingSender) HeldSince(from time.Time) time.Duration {
	if h, ok := c.Sender.(spool.Holder); ok {
		return h.HeldSince(from)
	}
	return 0
}

// Expired implements spool.Expirer for the sender it counts for.
func (c countingSender) Expired(ev *spool.Event) { spool.TellExpired(c.Sender, ev) }

// Buried implements spool.Burier for the sender it counts for.
func (c countingSender) Buried(ev *spool.Event, reason string) {
	spool.TellBuried(c.Sender, ev, reason)
}

// drainSender moves the fallback's events into the queue: each publish is
// one "delivery" of the local spool, retried with its backoff while the
// engine is unreachable.
type drainSender struct{ s *Spool }

// Send implements spool.Sender.
func (d drainSender) Send(ctx context.Context, ev *spool.Event) (int, string, error) {
	if !d.s.b.Up() {
		return 0, "", ErrUnavailable
	}
	out := *ev
	out.Attempts, out.NextTry, out.LastError = 0, time.Time{}, ""
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, d.s.timeout)
	err := d.s.q.Publish(pctx, &out)
	cancel()
	d.s.metrics.observe("drain", start, err)
	switch {
	case err == nil:
		return http.StatusOK, "", nil
	case errors.Is(err, ErrFull):
		return http.StatusServiceUnavailable, "cluster queue full", nil
	case errors.Is(err, ErrTooLarge):
		// never fits: a dead letter of the fallback, not a retry
		return http.StatusRequestEntityTooLarge, err.Error(), nil
	default:
		return 0, "", err
	}
}
