package caddyhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// checkCluster refuses a `spool cluster` config that cannot work, naming
// the field, before anything is opened: engine says whether the handler
// has a cluster engine, gateway is its gateway address.
func (sc *SpoolConfig) checkCluster(engine bool, gateway string) error {
	switch {
	case sc == nil || !sc.Cluster:
		return nil
	case !engine:
		return fmt.Errorf("spool: cluster needs a cluster engine (cluster nats { … })")
	case sc.Dir != "":
		return fmt.Errorf("spool: dir and cluster exclude each other; a cluster's local spool is fallback <dir>")
	case sc.Rate != nil:
		if _, err := sc.rate(); err != nil {
			return err
		}
	}
	switch {
	case sc.Fallback == "":
		return fmt.Errorf("spool: fallback: required with spool cluster: a directory (a local spool while the cluster is unreachable) or reject (503)")
	case sc.Deliver != nil && *sc.Deliver && gateway == "":
		return fmt.Errorf("spool: deliver on needs gateway")
	case sc.MaxIdenticalErrors < 0:
		return fmt.Errorf("spool: max_identical_errors %d is negative", sc.MaxIdenticalErrors)
	}
	return nil
}

// openClusterSpool makes the queue of cs the sink: with deliver on (by
// default when the handler has a gateway: hasGateway), snd is registered
// with the queue (the oldest registration delivers, as with a local
// spool); with a fallback directory, a local spool takes the events while
// the cluster is unreachable and moves them into the queue when it is
// back.
func openClusterSpool(ctx caddy.Context, held *poolHold, sc *SpoolConfig, cs *clusterState, snd spool.Sender, hasGateway bool,
	gw *gatewayClient, metrics *hookMetrics, logger *zap.Logger) (spoolSetup, error) {
	var s spoolSetup
	deliver := hasGateway
	if sc.Deliver != nil {
		deliver = *sc.Deliver
	}
	q := cs.queueStore()
	if q == nil {
		return s, fmt.Errorf("spool: cluster: the engine has no queue")
	}
	var fb *spool.Store
	var fbShare *spoolShare
	var fcfg spool.Config
	switch sc.Fallback {
	case fallbackReject:
	default:
		dir, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(sc.Fallback, ""))
		if err != nil {
			return s, fmt.Errorf("spool: fallback: %w", err)
		}
		fcfg = spool.Config{Dir: dir, MaxBytes: sc.MaxBytes, MaxAge: time.Duration(sc.MaxAge),
			RetryInitial: time.Duration(sc.RetryInitial), RetryMax: clusterDrainRetryMax, Workers: 1}
		if fcfg.RetryInitial > clusterDrainRetryMax {
			fcfg.RetryInitial = clusterDrainRetryMax
		}
		if fbShare, err = openSpoolShare(ctx, held, fcfg, metrics, logger); err != nil {
			return s, fmt.Errorf("spool: fallback: %w", err)
		}
		fb = fbShare.localStore()
	}
	sp, err := cs.queueSpool(fb)
	if err != nil {
		return s, fmt.Errorf("spool: cluster: %w", err)
	}
	share, _, err := hold(held, spoolPoolPrefix+"cluster|"+cs.poolKey(), func() (*spoolShare, error) {
		return newShare(nil, &queueTarget{sp: sp, q: q}), nil
	})
	if err != nil {
		return s, err
	}
	qt := share.delivery().(*queueTarget)
	if !deliver {
		snd = nil
	}
	qt.setWorkers(sc.Workers)
	rate, err := sc.rate()
	if err != nil {
		return s, err
	}
	reg, err := share.register(snd, rate, nil, ctx.Done())
	if err != nil {
		return s, fmt.Errorf("spool: cluster %s: %w", cs.namespace(), err)
	}
	var fbReg *spoolReg
	if fbShare != nil {
		if fbReg, err = fbShare.register(sp.Drain(), spool.Rate{}, &fcfg, ctx.Done()); err != nil {
			return spoolSetup{reg: reg}, fmt.Errorf("spool: fallback %s: %w", sc.Fallback, err)
		}
	}
	ops := &clusterOps{qt: qt, settings: clusterQueueSettings(sc), fallback: fb, tracker: share.deliveries(), up: cs.up}
	return spoolSetup{
		sink:     spoolSink{gateway: gw, store: clusterAppender{sp}, logger: logger},
		reg:      reg,
		fallback: fbReg,
		ops:      ops,
		dir:      "cluster:" + cs.namespace(),
		report:   ops,
	}, nil
}

// Refusals of the cluster queue.
var (
	// errClusterDown: the cluster cannot take an event and there is no
	// fallback spool; nothing was stored.
	errClusterDown = &hookError{status: http.StatusServiceUnavailable, reason: "cluster unavailable; retry later", retryAfter: clusterRetryAfter}
	// errClusterUnconfirmed: the event was sent to the cluster but its
	// acknowledgement did not arrive in time, and there is no fallback
	// spool: it may have been stored (and be delivered) or not. Not a
	// 503: the event may be in the queue and be delivered, so "not
	// accepted" would be false; as for a gateway timeout, a retry is safe
	// only with the same Idempotency-Key.
	errClusterUnconfirmed = &hookError{status: http.StatusGatewayTimeout, reason: reasonClusterUnconfirmed, retryAfter: clusterRetryAfter}
)

// errClusterTooLarge: the event is larger than the cluster's servers take
// in one message (NATS max_payload); nothing was stored, and a retry
// cannot succeed: 413, not 503.
var errClusterTooLarge = &hookError{status: http.StatusRequestEntityTooLarge, reason: reasonClusterTooLarge}

// reasonClusterTooLarge is the 413 of errClusterTooLarge.
const reasonClusterTooLarge = "request too large for the cluster queue: the body exceeds what the NATS servers take in one message (max_payload)"

// reasonClusterUnconfirmed is the 504 of errClusterUnconfirmed.
const reasonClusterUnconfirmed = "cluster queue timeout: the event may have been accepted; retry with the same Idempotency-Key so that it does not run twice"

// clusterAppender appends to the cluster queue (or its fallback).
type clusterAppender struct{ sp *cluster.Spool }

func (a clusterAppender) append(ctx context.Context, evs []*spool.Event) error {
	_, err := a.sp.Append(ctx, evs...)
	switch {
	case errors.Is(err, cluster.ErrFull), errors.Is(err, spool.ErrFull):
		return errSpoolFull
	case errors.Is(err, cluster.ErrTooLarge):
		return errClusterTooLarge
	case errors.Is(err, cluster.ErrUnconfirmed):
		return errClusterUnconfirmed
	case errors.Is(err, cluster.ErrUnavailable):
		return errClusterDown
	}
	return err
}

// queueTarget is the cluster queue as a spoolShare's delivery target:
// the delivering registration's sender runs this node's delivery
// workers, unless delivery is paused here.
type queueTarget struct {
	sp *cluster.Spool
	q  cluster.QueueStore

	mu      sync.Mutex
	sender  spool.Sender
	workers int
	paused  bool
	pauses  spool.PauseLog // this node's pauses, not counted toward max_age
}

// heldSender is the node's sender as the queue sees it: it also says how
// long this node's pauses held deliveries (spool.Holder), so that a pause
// never expires what it holds, as with a local spool.
type heldSender struct {
	spool.Sender
	t *queueTarget
}

// HeldSince implements spool.Holder.
func (h heldSender) HeldSince(from time.Time) time.Duration {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	return h.t.pauses.HeldSince(from, time.Now())
}

// Expired implements spool.Expirer for the node's sender.
func (h heldSender) Expired(ev *spool.Event) { spool.TellExpired(h.Sender, ev) }

// Buried implements spool.Burier for the sender it holds.
func (h heldSender) Buried(ev *spool.Event, reason string) { spool.TellBuried(h.Sender, ev, reason) }

// setWorkers sets the delivery goroutines of the next SetSender.
func (t *queueTarget) setWorkers(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n <= 0 {
		n = spool.DefaultWorkers
	}
	t.workers = n
}

// SetSender implements deliveryTarget.
func (t *queueTarget) SetSender(snd spool.Sender) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sender = snd
	t.apply()
}

// SetRate implements deliveryTarget: the rate is cluster-wide, each
// delivery node taking its share.
func (t *queueTarget) SetRate(r spool.Rate) { t.sp.SetRate(r) }

// setPaused stops or resumes this node's delivery, recording the pause.
func (t *queueTarget) setPaused(p bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = p
	if t.pauses.Set(p, time.Now()) {
		t.pauses.Prune(time.Time{}) // bounds the spans kept
	}
	t.apply()
}

// apply starts, retargets or stops the delivery workers; t.mu is held.
func (t *queueTarget) apply() {
	if t.sender == nil || t.paused {
		t.sp.SetSender(nil, 0)
		return
	}
	t.sp.SetSender(heldSender{Sender: t.sender, t: t}, t.workers)
}

// clusterOps operates the cluster queue for the admin API and `caddy
// hooks spool`: its counters, its dead letters (shared by every node) and
// this node's delivery (pause/resume).
type clusterOps struct {
	qt       *queueTarget
	settings spool.Stats // the queue's settings, with the engine's defaults
	fallback *spool.Store
	tracker  *cluster.DeliveryTracker // this node's deliveries
	up       func() bool              // the engine answers this node
}

// facts implements deliveryReport: this node's delivery, paused or not
// (nil: deliver off here).
func (o *clusterOps) facts(now time.Time) *cluster.DeliveryFacts {
	o.qt.mu.Lock()
	delivers, paused, workers := o.qt.sender != nil, o.qt.paused, o.qt.workers
	o.qt.mu.Unlock()
	if !delivers {
		return nil
	}
	f := o.tracker.Facts(now)
	f.Delivers, f.Paused, f.Connected, f.Workers = true, paused, o.up(), workers
	f.Ready = !paused && f.InFlight == 0 && o.qt.q.Counters().Ready
	return &f
}

// queueHealth implements deliveryReport: the queue's counters as the
// engine keeps them, and what the fallback spool holds.
func (o *clusterOps) queueHealth(ctx context.Context) cluster.QueueHealth {
	ctx, cancel := context.WithTimeout(ctx, clusterAdminTimeout)
	defer cancel()
	qs, err := o.qt.q.Stats(ctx)
	h := cluster.QueueHealth{Known: err == nil, Depth: qs.Depth, InFlight: qs.InFlight, AckWait: qs.AckWait, DeadCount: qs.DeadLetters}
	if !qs.Oldest.IsZero() {
		h.Oldest = time.Since(qs.Oldest)
	}
	if o.fallback != nil {
		fs := o.fallback.Stats()
		h.Depth += uint64(fs.Depth)
		h.Oldest = max(h.Oldest, fs.OldestAge)
	}
	return h
}

// clusterQueueSettings are the settings of the cluster queue as its engine
// applies them (the same defaults as a local spool's); a reload with other
// ones opens the queue anew under them (they are part of the engine key).
func clusterQueueSettings(sc *SpoolConfig) spool.Stats {
	or := func(d caddy.Duration, def time.Duration) time.Duration {
		if d > 0 {
			return time.Duration(d)
		}
		return def
	}
	st := spool.Stats{MaxBytes: sc.MaxBytes, MaxAge: or(sc.MaxAge, spool.DefaultMaxAge),
		RetryInitial: or(sc.RetryInitial, spool.DefaultRetryInitial), Workers: sc.Workers, MaxIdentical: sc.MaxIdenticalErrors}
	if st.MaxIdentical <= 0 {
		st.MaxIdentical = spool.DefaultMaxIdentical
	}
	st.RetryMax = or(sc.RetryMax, max(st.RetryInitial, spool.DefaultRetryMax))
	if st.Workers <= 0 {
		st.Workers = spool.DefaultWorkers
	}
	return st
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), clusterAdminTimeout)
}

// Status implements spool.Ops: the queue's depth, bytes and dead letters,
// plus what the fallback spool holds. When the queue cannot be read, the
// error comes with what this node knows (settings, fallback, pause).
func (o *clusterOps) Status() (spool.Stats, error) {
	ctx, cancel := opCtx()
	defer cancel()
	st := o.settings
	st.Rate = o.qt.sp.Rate() // cluster-wide; this node delivers its share
	qs, err := o.qt.q.Stats(ctx)
	if err == nil {
		st.Depth, st.Bytes, st.Dead = int(qs.Depth), int64(qs.Bytes), int(qs.DeadLetters)
	}
	if o.fallback != nil {
		fs := o.fallback.Stats()
		st.Depth += fs.Depth
		st.OldestAge = fs.OldestAge
	}
	o.qt.mu.Lock()
	st.Paused, st.Delivering = o.qt.paused, o.qt.sender != nil
	o.qt.mu.Unlock()
	return st, err
}

// DeadLetters implements spool.Ops.
func (o *clusterOps) DeadLetters() ([]*spool.Event, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return o.qt.q.DeadLetters(ctx)
}

// Retry implements spool.Ops.
func (o *clusterOps) Retry(ids ...string) (int, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return o.qt.q.Retry(ctx, ids...)
}

// Drop implements spool.Ops.
func (o *clusterOps) Drop(ids ...string) (int, error) {
	ctx, cancel := opCtx()
	defer cancel()
	return o.qt.q.Drop(ctx, ids...)
}

// Pause implements spool.Ops: this node stops delivering (the others
// go on); accepting continues.
func (o *clusterOps) Pause() error { o.qt.setPaused(true); return nil }

// Resume implements spool.Ops.
func (o *clusterOps) Resume() error { o.qt.setPaused(false); return nil }

// Interface guards
var (
	_ spool.Ops      = (*clusterOps)(nil)
	_ deliveryTarget = (*queueTarget)(nil)
	_ spool.Holder   = heldSender{}
)
