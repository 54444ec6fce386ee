package caddyhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	_ "github.com/caddyhook/caddyhook/caddyhook/cluster/natscluster" // the nats engine
	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// Cluster timings. One idempotency or publish operation is bounded by the
// engine's own timeout (Backend.Timeout).
const (
	// clusterAdminTimeout bounds an admin API operation on the queue.
	clusterAdminTimeout = 4 * time.Second
	// clusterRetryAfter is what a client is told to wait when the cluster
	// cannot take an event (fallback reject) or a duplicate is in flight.
	clusterRetryAfter = 5 * time.Second
	// clusterBusyRetryAfter is the Retry-After of a 409 for a key whose
	// first request is still being dispatched on another node.
	clusterBusyRetryAfter = time.Second
	// clusterDrainRetryMax bounds the fallback spool's wait between two
	// attempts to move its events into the queue once the cluster is back.
	clusterDrainRetryMax = 5 * time.Second
)

// errClusterDown: the cluster cannot take an event and there is no
// fallback spool; nothing was stored.
var errClusterDown = errors.New("cluster unavailable")

// errClusterUnconfirmed: the event was sent to the cluster but its
// acknowledgement did not arrive in time, and there is no fallback spool:
// it may have been stored (and be delivered) or not.
var errClusterUnconfirmed = errors.New("cluster did not confirm in time")

// reasonClusterUnconfirmed is the 504 of errClusterUnconfirmed.
const reasonClusterUnconfirmed = "cluster queue timeout: the event may have been accepted; retry with the same Idempotency-Key so that it does not run twice"

// clusterState is a handler's view of its cluster engine.
type clusterState struct {
	backend cluster.Backend
	metrics *cluster.Metrics
	sync    *cluster.LockSync    // shared with the handlers of the same lockout table
	idem    *cluster.Idempotency // cluster-wide idempotency claims
	name    string               // the namespace, for the admin API
	key     string               // engine settings and parameters: tells backends apart
}

// clusterParams are the engine parameters of h: its namespace (from the
// base path unless the engine sets one), the longest lock, the
// idempotency TTL and, with `spool cluster`, the queue's settings.
func (h *Handler) clusterParams() cluster.Params {
	p := cluster.Params{
		Name:           cluster.NameFromPath(h.base),
		LockTTL:        time.Duration(h.AuthFailures.Window) + h.lockout.Policy().LockFor,
		IdempotencyTTL: time.Duration(h.IdempotencyTTL),
		Logger:         h.logger.Named("cluster"),
	}
	if sc := h.Spool; sc != nil && sc.Cluster {
		p.Queue = &cluster.QueueParams{MaxBytes: sc.MaxBytes, MaxAge: time.Duration(sc.MaxAge),
			RetryInitial: time.Duration(sc.RetryInitial), RetryMax: time.Duration(sc.RetryMax)}
	}
	return p
}

// provisionCluster loads the cluster engine, opens this handler's
// namespace and joins the shared lockout. Every piece is given back by
// Cleanup: the LockSync through the pool, the backend by the engine
// module's own Cleanup.
func (h *Handler) provisionCluster(ctx caddy.Context) error {
	if h.ClusterRaw == nil {
		return nil
	}
	p := h.clusterParams()
	// the engine's settings tell backends apart (LoadModule clears ClusterRaw)
	engineKey, err := json.Marshal(struct {
		E json.RawMessage
		N string
		Q *cluster.QueueParams
	}{h.ClusterRaw, p.Name, p.Queue})
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModule(h, "ClusterRaw")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	eng, ok := mod.(cluster.Engine)
	if !ok {
		return fmt.Errorf("cluster: module %T is not a cluster engine", mod)
	}
	ms, _, err := hold(&h.held, clusterMetricsKey, func() (*clusterMetricsShare, error) {
		m, err := cluster.NewMetrics(nil)
		return &clusterMetricsShare{m}, err
	})
	if err != nil {
		return err
	}
	metrics := ms.m
	if err := metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("cluster metrics: %w", err)
	}
	metrics.SetUnreadable(h.metrics.unreadable)
	p.Metrics = metrics
	b, err := eng.Open(p)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// the node id tells connections apart that settings do not (a signing
	// key read from a file that changed)
	cs := &clusterState{backend: b, metrics: metrics, name: b.Name(), key: string(engineKey) + "|" + b.Node()}
	h.cluster = cs
	cs.metrics.Bind(b)

	if err := h.provisionLockSync(b, cs, p.LockTTL); err != nil {
		return err
	}

	// a copy waits for the first request's dispatch: a gateway call, or
	// with a spool a write into it (within the engine's timeout)
	wait := time.Duration(h.GatewayTimeout)
	lease := time.Duration(h.GatewayWaitTimeout) + 2*b.Timeout()
	if h.Spool != nil {
		wait, lease = b.Timeout(), time.Duration(h.GatewayTimeout)+2*b.Timeout()
	}
	cs.idem = cluster.NewIdempotency(b.Claims(), cluster.IdempotencyOptions{Lease: lease, Wait: wait,
		Timeout: b.Timeout(), Metrics: cs.metrics})
	return nil
}

// clusterMetricsShare is the cluster collectors in the usage pool
// (clusterMetricsKey), so that they keep counting across reloads.
type clusterMetricsShare struct{ m *cluster.Metrics }

// Destruct implements caddy.Destructor.
func (*clusterMetricsShare) Destruct() error { return nil }

// checkClusterSpool refuses a `spool cluster` config that cannot work,
// naming the field, before anything is opened.
func (h *Handler) checkClusterSpool() error {
	sc := h.Spool
	switch {
	case sc == nil || !sc.Cluster:
		return nil
	case h.ClusterRaw == nil:
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
	case sc.Deliver != nil && *sc.Deliver && h.Gateway == "":
		return fmt.Errorf("spool: deliver on needs gateway")
	}
	return nil
}

// provisionClusterSpool makes the cluster queue the handler's sink: with
// deliver on, the handler's gateway sender is registered with the queue
// (the oldest registration delivers, as with a local spool); with a
// fallback directory, a local spool takes the events while the cluster is
// unreachable and moves them into the queue when it is back.
func (h *Handler) provisionClusterSpool(ctx caddy.Context) error {
	sc := h.Spool
	deliver := h.gateway.addr.network != ""
	if sc.Deliver != nil {
		deliver = *sc.Deliver
	}
	cs := h.cluster
	q := cs.backend.Queue()
	if q == nil {
		return fmt.Errorf("spool: cluster: the engine has no queue")
	}
	var fb *spool.Store
	var fbShare *spoolShare
	var fcfg spool.Config
	switch sc.Fallback {
	case fallbackReject:
	default:
		dir, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(sc.Fallback, ""))
		if err != nil {
			return fmt.Errorf("spool: fallback: %w", err)
		}
		fcfg = spool.Config{Dir: dir, MaxBytes: sc.MaxBytes, MaxAge: time.Duration(sc.MaxAge),
			RetryInitial: time.Duration(sc.RetryInitial), RetryMax: clusterDrainRetryMax, Workers: 1}
		if fcfg.RetryInitial > clusterDrainRetryMax {
			fcfg.RetryInitial = clusterDrainRetryMax
		}
		if fbShare, err = h.openSpoolShare(ctx, fcfg); err != nil {
			return fmt.Errorf("spool: fallback: %w", err)
		}
		fb = fbShare.store
	}
	sp, err := cluster.NewSpool(cs.backend, cluster.SpoolOptions{Fallback: fb, Metrics: cs.metrics})
	if err != nil {
		return fmt.Errorf("spool: cluster: %w", err)
	}
	share, _, err := hold(&h.held, spoolPoolPrefix+"cluster|"+cs.key, func() (*spoolShare, error) {
		return &spoolShare{target: &queueTarget{sp: sp, q: q}}, nil
	})
	if err != nil {
		return err
	}
	qt := share.target.(*queueTarget)
	var snd spool.Sender
	if deliver {
		snd = gatewaySender{h}
	}
	qt.setWorkers(sc.Workers)
	rate, err := sc.rate()
	if err != nil {
		return err
	}
	if h.spoolReg, err = share.register(snd, rate, nil, ctx.Done()); err != nil {
		return fmt.Errorf("spool: cluster %s: %w", cs.name, err)
	}
	if fbShare != nil {
		if h.fallbackReg, err = fbShare.register(sp.Drain(), spool.Rate{}, &fcfg, ctx.Done()); err != nil {
			return fmt.Errorf("spool: fallback %s: %w", sc.Fallback, err)
		}
	}
	h.sink = spoolSink{h: h, store: clusterAppender{sp}}
	h.spoolOps = &clusterOps{qt: qt, settings: clusterQueueSettings(sc), fallback: fb}
	h.spoolDir = "cluster:" + cs.name
	return nil
}

// clusterAppender appends to the cluster queue (or its fallback).
type clusterAppender struct{ sp *cluster.Spool }

func (a clusterAppender) append(ctx context.Context, evs []*spool.Event) error {
	_, err := a.sp.Append(ctx, evs...)
	switch {
	case errors.Is(err, cluster.ErrFull), errors.Is(err, spool.ErrFull):
		return errFull
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
		RetryInitial: or(sc.RetryInitial, spool.DefaultRetryInitial), Workers: sc.Workers}
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
	_ cluster.LockTarget = lockTarget{}
	_ spool.Ops          = (*clusterOps)(nil)
	_ deliveryTarget     = (*queueTarget)(nil)
	_ spool.Holder       = heldSender{}
)
