package cluster

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/internal/promreg"
	"github.com/caddyhook/caddyhook/internal/version"
)

// Metrics are the cluster's Prometheus collectors. A nil *Metrics records
// nothing. The up gauge reads the backend bound with Bind, so one
// registration survives config reloads.
type Metrics struct {
	backend      atomic.Pointer[backendBox]
	ops          *prometheus.HistogramVec
	remoteFails  prometheus.Counter
	remoteLocks  prometheus.Counter
	fallbacks    prometheus.Counter
	redeliveries prometheus.Counter
	rejected     *prometheus.CounterVec
	replays      *prometheus.CounterVec
	heldReqs     prometheus.Counter
	members      *prometheus.GaugeVec
	upGauge      prometheus.GaugeFunc
	levelGauge   prometheus.GaugeFunc
	unreadable   atomic.Pointer[version.Unreadable]
	reconnects   *prometheus.CounterVec
	redundancy   *redundancyCollector
}

type backendBox struct{ Backend }

// NewMetrics registers the cluster collectors on reg (nil: not
// registered), reusing those a previous config registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := newMetrics()
	if err := m.Register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// newMetrics returns the collectors, not yet registered.
func newMetrics() *Metrics {
	const ns, sub = "caddy", "hooks"
	m := &Metrics{
		ops: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_operation_duration_seconds",
			Help:    "Latency of cluster engine operations, by operation and outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "outcome"}),
		remoteFails: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_remote_failures_total",
			Help: "Authentication failures seen by other nodes and folded into this node's lockout table.",
		}),
		remoteLocks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_remote_locks_applied_total",
			Help: "Locks written by other nodes (or an earlier run) that changed this node's lockout table.",
		}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_fallbacks_total",
			Help: "Events accepted into the local fallback spool because the cluster was unreachable.",
		}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_redeliveries_total",
			Help: "Cluster queue deliveries from this node that failed and were scheduled again.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_rejected_total",
			Help: "Records read from the cluster engine and dropped because they were not sealed with the cluster's signing key, by kind (queue, dead_letter, idempotency, lock, failures, members, outcome).",
		}, []string{"kind"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_replays_total",
			Help: "Sealed records read from the cluster engine and dropped as replays (repeated, or older than their freshness window), by kind (failures, lock, idempotency, lease, outcome).",
		}, []string{"kind"}),
		heldReqs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_lockout_held_total",
			Help: "Failed authentications answered as locked because earlier failures of the address were not yet confirmed by the node owning its count.",
		}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "cluster_members",
			Help: "Live members this node sees, itself included, by namespace and role (lockout, delivery).",
		}, []string{"name", "role"}),
	}
	m.reconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "cluster_reconnects_total",
		Help: "Reconnections of this node's engine connection, by reason: stalled (the node left a server that stopped answering while its connection stayed up), disconnected (the connection broke).",
	}, []string{"reason"})
	m.redundancy = &redundancyCollector{m: m,
		current: prometheus.NewDesc(ns+"_"+sub+"_cluster_replicas_current",
			"Replicas of each stream and bucket of the cluster namespace that are current (the leader included; 0 without a leader), as last read by this node.",
			[]string{"stream"}, nil),
		configured: prometheus.NewDesc(ns+"_"+sub+"_cluster_replicas",
			"Replicas each stream and bucket of the cluster namespace is configured with.", []string{"stream"}, nil),
		degraded: prometheus.NewDesc(ns+"_"+sub+"_cluster_degraded",
			"1 while the cluster serves with less redundancy than configured (a stream or bucket with fewer current replicas, or a leader that does not answer), 0 otherwise.",
			nil, nil),
	}
	m.upGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "cluster_up",
		Help: "1 while the cluster engine is reachable, 0 otherwise.",
	}, m.up)
	m.levelGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "cluster_level",
		Help: "The cluster version gate: the lowest cluster level among the live nodes of the namespace, this one included (0: a node of a release before v0.9.0 runs).",
	}, m.level)
	return m
}

// Register registers the collectors on reg (nil: nothing to do), so that
// one Metrics keeps counting on the registry of each config; collectors
// registered there before are fine.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.ops, m.remoteFails, m.remoteLocks, m.fallbacks, m.redeliveries, m.rejected,
		m.replays, m.heldReqs, m.members, m.upGauge, m.levelGauge, m.reconnects, m.redundancy} {
		if _, err := promreg.Register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// Bind makes the up gauge read b (nil: 0).
func (m *Metrics) Bind(b Backend) {
	if m == nil {
		return
	}
	if b == nil {
		m.backend.Store(nil)
		return
	}
	m.backend.Store(&backendBox{b})
}

func (m *Metrics) level() float64 {
	if bx := m.backend.Load(); bx != nil {
		return float64(bx.Gate().Level())
	}
	return 0
}

func (m *Metrics) up() float64 {
	if bx := m.backend.Load(); bx != nil && bx.Up() {
		return 1
	}
	return 0
}

// Reconnected counts one reconnection of the engine's connection.
func (m *Metrics) Reconnected(reason string) {
	if m != nil {
		m.reconnects.WithLabelValues(reason).Inc()
	}
}

// redundancyCollector reports the bound backend's Redundancy.
type redundancyCollector struct {
	m                             *Metrics
	current, configured, degraded *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *redundancyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.current
	ch <- c.configured
	ch <- c.degraded
}

// Collect implements prometheus.Collector.
func (c *redundancyCollector) Collect(ch chan<- prometheus.Metric) {
	bx := c.m.backend.Load()
	if bx == nil {
		return
	}
	r, ok := bx.Backend.(Redundant)
	if !ok {
		return
	}
	h := r.Redundancy()
	for _, st := range h.Streams {
		ch <- prometheus.MustNewConstMetric(c.current, prometheus.GaugeValue, float64(st.Current), st.Name)
		ch <- prometheus.MustNewConstMetric(c.configured, prometheus.GaugeValue, float64(st.Replicas), st.Name)
	}
	degraded := 0.0
	if h.Degraded() {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, degraded)
}

// observe records one operation's latency and outcome.
func (m *Metrics) observe(op string, start time.Time, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ErrFull):
		outcome = "full"
	case errors.Is(err, ErrBusy):
		outcome = "busy"
	case errors.Is(err, ErrUnconfirmed):
		outcome = "unconfirmed"
	default:
		outcome = "error"
	}
	m.ops.WithLabelValues(op, outcome).Observe(time.Since(start).Seconds())
}

func (m *Metrics) remoteFailures(n int) {
	if m != nil {
		m.remoteFails.Add(float64(n))
	}
}

func (m *Metrics) remoteLock() {
	if m != nil {
		m.remoteLocks.Inc()
	}
}

// held counts one request answered as locked while its address was held.
func (m *Metrics) held() {
	if m != nil {
		m.heldReqs.Inc()
	}
}

// setMembers sets the members of role seen in namespace name.
func (m *Metrics) setMembers(name, role string, n int) {
	if m != nil {
		m.members.WithLabelValues(name, role).Set(float64(n))
	}
}

// lockoutMembers sets the lockout members seen in namespace name.
func (m *Metrics) lockoutMembers(name string, n int) { m.setMembers(name, "lockout", n) }

func (m *Metrics) fallback(n int) {
	if m != nil {
		m.fallbacks.Add(float64(n))
	}
}

// redelivered counts one failed delivery scheduled again.
func (m *Metrics) redelivered() {
	if m != nil {
		m.redeliveries.Inc()
	}
}

// Kinds of records counted by Rejected.
const (
	RejectedQueue       = "queue"
	RejectedDeadLetter  = "dead_letter"
	RejectedIdempotency = "idempotency"
	RejectedLock        = "lock"
	RejectedFailures    = "failures"
	RejectedMembers     = "members"
	RejectedOutcome     = "outcome"
	RejectedView        = "view"
)

// Rejected counts one record of kind that an engine read and dropped
// because it did not open with the cluster's keys.
func (m *Metrics) Rejected(kind string) {
	if m != nil {
		m.rejected.WithLabelValues(kind).Inc()
	}
}

// Replayed counts n sealed records of kind dropped as replays.
func (m *Metrics) Replayed(kind string, n int) {
	if m != nil && n > 0 {
		m.replays.WithLabelValues(kind).Add(float64(n))
	}
}

// SetUnreadable makes Newer count on u (the handler's
// caddy_hooks_records_unreadable_total, shared with its other stores).
func (m *Metrics) SetUnreadable(u *version.Unreadable) {
	if m != nil {
		m.unreadable.Store(u)
	}
}

// Newer counts one record of store (internal/version's store names)
// that a newer release wrote, kept unread.
func (m *Metrics) Newer(store string, v int) {
	if m != nil {
		m.unreadable.Load().Add(store, v, 1)
	}
}
