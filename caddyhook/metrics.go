package caddyhook

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/promreg"
	"github.com/caddyhook/caddyhook/internal/version"
)

// hookMetrics are the handler's Prometheus collectors on Caddy's registry.
type hookMetrics struct {
	requests       *prometheus.CounterVec
	authFailures   prometheus.Counter
	dispatch       *prometheus.HistogramVec
	activeLockouts prometheus.GaugeFunc
	// forwardedUnparsed counts requests keyed on a trusted hop because
	// the forwarded entry it wrote is not an address (clientAddress).
	forwardedUnparsed prometheus.Counter
	// buildInfo is caddy_hooks_build_info; unreadable counts the records
	// the stores kept because a newer release wrote them.
	buildInfo  prometheus.Collector
	unreadable *version.Unreadable
}

// provisionMetrics takes the collectors from the usage pool, so that the
// counters keep counting across config reloads (each config has its own
// registry), and registers them on this config's registry.
func (h *Handler) provisionMetrics(reg prometheus.Registerer) error {
	m, _, err := hold(&h.held, metricsPoolKey, func() (*hookMetrics, error) { return newHookMetrics(), nil })
	if err != nil {
		return err
	}
	h.metrics = m
	return h.metrics.register(reg)
}

// newHookMetrics returns the collectors, not yet registered.
func newHookMetrics() *hookMetrics {
	const ns, sub = "caddy", "hooks"
	return &hookMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Hook requests by route and response status.",
		}, []string{"route", "code"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "auth_failures_total",
			Help: "Hook requests refused for a missing or wrong token or signature.",
		}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "dispatch_duration_seconds",
			Help:    "Time to hand one action to the gateway, by kind and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind", "outcome"}),
		activeLockouts: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "active_lockouts",
			Help: "Client addresses currently locked out after repeated auth failures.",
		}, activeLockouts),
		forwardedUnparsed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "forwarded_unparsed_total",
			Help: "Hook requests keyed on a trusted proxy because the X-Forwarded-For entry it wrote is not an address.",
		}),
		buildInfo:  version.NewBuildInfo(),
		unreadable: version.NewUnreadable(),
	}
}

// register registers the collectors on reg; a collector already there
// (another hooks handler of the same config) is fine.
func (m *hookMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.authFailures, m.dispatch, m.activeLockouts, m.forwardedUnparsed,
		m.buildInfo, m.unreadable.Collector()} {
		if _, err := promreg.Register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// Destruct implements caddy.Destructor for the usage pool.
func (*hookMetrics) Destruct() error { return nil }

// activeLockouts counts the locked addresses of the running handlers'
// lockout tables, each table once.
func activeLockouts() float64 {
	now := time.Now()
	seen := map[*lockout.Table]bool{}
	n := 0
	for _, lh := range liveHandlers() {
		if t := lh.h.lockout; !seen[t] {
			seen[t] = true
			n += t.Active(now)
		}
	}
	return float64(n)
}

// observeRequest counts one answered request.
func (m *hookMetrics) observeRequest(route string, status int) {
	m.requests.WithLabelValues(route, statusLabel(status)).Inc()
}

// observeDispatch records one gateway hand-off.
func (m *hookMetrics) observeDispatch(kind actionKind, outcome string, d time.Duration) {
	m.dispatch.WithLabelValues(kind.String(), outcome).Observe(d.Seconds())
}

// statusLabel avoids strconv for the common codes.
func statusLabel(status int) string {
	switch status {
	case 200:
		return "200"
	case 204:
		return "204"
	case 400:
		return "400"
	case 401:
		return "401"
	case 404:
		return "404"
	case 429:
		return "429"
	}
	return strconv.Itoa(status)
}
