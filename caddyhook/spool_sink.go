package caddyhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/version"
)

// SpoolConfig turns on durable accept: every accepted action is written
// (fsync'd) to a bbolt spool before the reply, and delivered to the
// gateway at least once, with retries.
type SpoolConfig struct {
	// Dir holds spool.db.
	Dir string `json:"dir,omitempty"`
	// Cluster spools into the cluster engine's replicated queue instead
	// of a local directory (Caddyfile `spool cluster`); a 200 then means
	// the engine acknowledged the event with its replicas.
	Cluster bool `json:"cluster,omitempty"`
	// Deliver runs cluster delivery workers on this node (default: on
	// when gateway is set). A node with deliver off needs no gateway.
	Deliver *bool `json:"deliver,omitempty"`
	// Fallback is where a cluster spool accepts events while the engine
	// is unreachable: a directory for a local spool that moves its events
	// into the queue once the engine is back, or "reject" (503).
	Fallback string `json:"fallback,omitempty"`
	// MaxBytes bounds the spool (default 1 GiB); when full, requests get 503.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// MaxAge dead-letters events not delivered in time (default 72h).
	MaxAge caddy.Duration `json:"max_age,omitempty"`
	// RetryInitial and RetryMax bound the exponential backoff (1s → 5m).
	RetryInitial caddy.Duration `json:"retry_initial,omitempty"`
	RetryMax     caddy.Duration `json:"retry_max,omitempty"`
	// Workers is the number of delivery goroutines (default 4).
	Workers int `json:"workers,omitempty"`
	// Rate, when set, caps deliveries to the gateway: at most Count send
	// attempts in any window of Interval; a burst waits in the spool.
	Rate *SpoolRate `json:"rate,omitempty"`
	// MaxIdenticalErrors is how many times in a row an event may get the
	// same gateway answer that a retry does not change (a 5xx but 502,
	// 503 and 504, such as the 500 of a transform that always throws)
	// before it goes to the dead letters with that answer, instead of
	// being retried until max_age (default 10). The sender's 200 stays:
	// the event was accepted. In a cluster each delivery node counts its
	// own attempts.
	MaxIdenticalErrors int `json:"max_identical_errors,omitempty"`
}

// SpoolRate is a delivery rate limit (Caddyfile `rate <count>/<interval>`).
type SpoolRate struct {
	Count    int            `json:"count,omitempty"`
	Interval caddy.Duration `json:"interval,omitempty"`
}

// fallbackReject is the Fallback value that answers 503 while the
// cluster is unreachable.
const fallbackReject = "reject"

// noGateway reports whether the handler needs no gateway: it only
// accepts into the cluster queue and delivers nothing.
func (c *SpoolConfig) noGateway() bool {
	return c != nil && c.Cluster && c.Deliver != nil && !*c.Deliver
}

// rate converts to the spool package's limit (zero: unlimited).
func (c *SpoolConfig) rate() (spool.Rate, error) {
	if c.Rate == nil {
		return spool.Rate{}, nil
	}
	r := spool.Rate{Count: c.Rate.Count, Interval: time.Duration(c.Rate.Interval)}
	if r.Unlimited() {
		return r, fmt.Errorf("spool: rate needs a count and an interval, e.g. rate 5/s")
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("spool: %w", err)
	}
	return r, nil
}

// spoolRetryAfter is what a client is told to wait when the spool is full.
const spoolRetryAfter = 30 * time.Second

// config converts to the spool package's settings.
func (c *SpoolConfig) config() (spool.Config, error) {
	dir, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(c.Dir, ""))
	if c.Dir == "" || err != nil {
		return spool.Config{}, fmt.Errorf("spool: dir is required")
	}
	sc := spool.Config{Dir: dir, MaxBytes: c.MaxBytes, MaxAge: time.Duration(c.MaxAge),
		RetryInitial: time.Duration(c.RetryInitial), RetryMax: time.Duration(c.RetryMax), Workers: c.Workers,
		MaxIdentical: c.MaxIdenticalErrors}
	return sc, sc.Validate()
}

// spoolSetup is what a spool gives its handler: the sink (spoolSink), the
// registrations to release at Cleanup, and its operations and name for
// the admin API and the CLI. A failed setup still holds what it
// registered.
type spoolSetup struct {
	sink     sink
	reg      *spoolReg // the handler's sender's registration
	fallback *spoolReg // the cluster fallback spool's drain registration
	ops      spool.Ops // nil without a spool
	dir      string    // the spool's directory, or cluster:<namespace>
	report   deliveryReport
}

// deliveryReport is what a spool tells of this node's delivery and of
// its queue, for the delivery health (the admin API's spool/delivery,
// the cluster view).
type deliveryReport interface {
	// facts are this node's delivery (nil: it does not deliver).
	facts(now time.Time) *cluster.DeliveryFacts
	// queueHealth reads the queue's counters.
	queueHealth(ctx context.Context) cluster.QueueHealth
}

// localDelivery reports a local spool's delivery: this process alone.
type localDelivery struct {
	store   *spool.Store
	tracker *cluster.DeliveryTracker
}

// facts implements deliveryReport.
func (d localDelivery) facts(now time.Time) *cluster.DeliveryFacts {
	st := d.store.Stats()
	if !st.Delivering {
		return nil
	}
	f := d.tracker.Facts(now)
	f.Delivers, f.Paused, f.Connected, f.Workers, f.InFlight = true, st.Paused, true, st.Workers, st.InFlight
	f.Ready = !st.Paused && st.InFlight == 0
	return &f
}

// queueHealth implements deliveryReport: a local spool has no ack_wait,
// so it is never judged stalled (its own workers deliver it).
func (d localDelivery) queueHealth(context.Context) cluster.QueueHealth {
	st := d.store.Stats()
	return cluster.QueueHealth{Depth: uint64(st.Depth), InFlight: uint64(st.InFlight), Oldest: st.OldestAge,
		DeadCount: uint64(st.Dead), Known: true}
}

// release gives back the registrations; it may run more than once.
func (s *spoolSetup) release() {
	for _, r := range []**spoolReg{&s.fallback, &s.reg} {
		if *r != nil {
			(*r).release()
			*r = nil
		}
	}
}

// openLocalSpool opens (or shares, across a reload) the local spool of sc
// and makes it the sink. The handler's gateway sender is registered with
// the spool; it delivers once it is the oldest registration, that is once
// the config that opened the spool before has been cleaned up.
func openLocalSpool(ctx caddy.Context, held *poolHold, c *SpoolConfig, snd spool.Sender, gw *gatewayClient,
	metrics *hookMetrics, logger *zap.Logger) (spoolSetup, error) {
	var s spoolSetup
	if c.Deliver != nil || c.Fallback != "" {
		return s, fmt.Errorf("spool: deliver and fallback are options of spool cluster")
	}
	sc, err := c.config()
	if err != nil {
		return s, err
	}
	rate, err := c.rate()
	if err != nil {
		return s, err
	}
	share, err := openSpoolShare(ctx, held, sc, metrics, logger)
	if err != nil {
		return s, err
	}
	if s.reg, err = share.register(snd, rate, &sc, ctx.Done()); err != nil {
		return s, fmt.Errorf("spool: %s: %w", sc.Dir, err)
	}
	s.sink = spoolSink{gateway: gw, store: localAppender{share.localStore()}, logger: logger}
	s.ops, s.dir = share.localStore(), sc.Dir
	s.report = localDelivery{share.localStore(), share.deliveries()}
	return s, nil
}

// openSpoolShare opens (or shares, across a reload) the local spool of
// sc.Dir and registers its metrics (the events of a newer release it
// keeps unread are counted on metrics).
func openSpoolShare(ctx caddy.Context, held *poolHold, sc spool.Config, metrics *hookMetrics, logger *zap.Logger) (*spoolShare, error) {
	share, _, err := hold(held, spoolPoolPrefix+sc.Dir, func() (*spoolShare, error) {
		st, err := openSpool(sc, logger.Named("spool"))
		if err != nil {
			return nil, err
		}
		for v, n := range st.Newer() {
			metrics.countUnreadable(version.StoreSpool, v, n)
		}
		return newSpoolShare(st), nil
	})
	if err != nil {
		if errors.Is(err, spool.ErrLocked) {
			return nil, fmt.Errorf("spool: %s is locked by another running instance: %w", sc.Dir, err)
		}
		return nil, fmt.Errorf("spool: %w", err)
	}
	if err := spool.RegisterMetrics(ctx.GetMetricsRegistry(), share.localStore()); err != nil {
		return nil, fmt.Errorf("spool metrics: %w", err)
	}
	return share, nil
}

// openSpool opens the spool; a corrupt spool.db is moved aside and its
// readable events restored into a fresh one (spool.Recover), so that a
// damaged file never keeps the server from starting, and the operator is
// told loudly what happened.
func openSpool(sc spool.Config, logger *zap.Logger) (*spool.Store, error) {
	st, sv, err := spool.Recover(sc, logger)
	if sv != nil {
		logger.Error("spool: the spool file was corrupt; it was moved aside and every readable event restored into a fresh spool",
			zap.String("reason", sv.Reason.Error()), zap.String("moved_to", sv.MovedTo),
			zap.Int("restored_queued", sv.Queued), zap.Int("restored_dead_letters", sv.Dead),
			zap.Int("skipped", sv.Skipped))
	}
	return st, err
}

// spoolSink answers once the actions are stored (on disk, or in the
// cluster queue); delivery follows.
type spoolSink struct {
	gateway *gatewayClient // its prefix: a forwarded event's path is stored below it
	store   eventAppender
	logger  *zap.Logger
}

// eventAppender stores events durably. A refusal it knows the answer of
// (the store is full, the cluster unreachable, …) is a *hookError; any
// other error is a failed write (503).
type eventAppender interface {
	append(ctx context.Context, evs []*spool.Event) error
}

// errSpoolFull is the 503 of a spool (or a cluster queue) at its size
// limit.
var errSpoolFull = &hookError{status: http.StatusServiceUnavailable, reason: "spool full; retry later", retryAfter: spoolRetryAfter}

// localAppender appends to a local spool.
type localAppender struct{ st *spool.Store }

func (a localAppender) append(ctx context.Context, evs []*spool.Event) error {
	err := a.st.Append(ctx, evs...)
	if errors.Is(err, spool.ErrFull) {
		return errSpoolFull
	}
	return err
}

// deliver appends items to the spool and composes the reply from the
// event ids, which are also the gateway's Idempotency-Keys.
func (s spoolSink) deliver(ctx context.Context, items []prepared, dropped int, ip netip.Addr) (int, []byte, *hookError) {
	// the client address whatever this handler's gateway_forward_client_ip:
	// the handler that delivers the event decides whether the gateway gets
	// it (a cluster's edges have no gateway settings)
	clientIP := ""
	if ip.IsValid() {
		clientIP = ip.String()
	}
	evs := make([]*spool.Event, len(items))
	ids := make([]string, len(items))
	now := time.Now()
	tc := traceFrom(ctx)
	for i := range items {
		kind := spool.KindAgent
		if items[i].kind == kindWake || items[i].wakeLane {
			kind = spool.KindWake // delivered in acceptance order
		}
		evs[i] = &spool.Event{ID: items[i].eventID, Kind: kind, Path: s.gateway.prefixed("/" + items[i].kind.String()),
			Body: items[i].body, ClientIP: clientIP, FirstSeen: now, TraceParent: tc.parent, TraceState: tc.state}
		if it := &items[i]; it.header != nil {
			evs[i].Path = it.path
			evs[i].PathBelowPrefix = s.gateway.belowPrefix(it.path) // forwarder.target: prefix + path below it
			evs[i].Header = it.header                               // encoded (copied) by Append; the Idempotency-Key among them (forwarder.prepare)
		}
		ids[i] = items[i].eventID
	}
	if err := s.store.append(ctx, evs); err != nil {
		if herr, ok := err.(*hookError); ok {
			return 0, nil, herr
		}
		s.logger.Error("spool write failed", zap.Error(err))
		return 0, nil, &hookError{status: http.StatusServiceUnavailable, reason: "spool unavailable; retry later", retryAfter: spoolRetryAfter}
	}
	return http.StatusOK, composeReply(items, ids, "", dropped), nil
}
