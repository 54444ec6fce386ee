package caddyhook

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/internal/promreg"
)

// hookMetrics are the handler's Prometheus collectors on Caddy's registry.
type hookMetrics struct {
	requests     *prometheus.CounterVec
	authFailures prometheus.Counter
	dispatch     *prometheus.HistogramVec
}

// newHookMetrics registers (or reuses, when another hooks handler of the
// same config registered them first) the collectors on reg. lockouts
// reports the active lockouts at scrape time.
func newHookMetrics(reg prometheus.Registerer, lockouts func() float64) (*hookMetrics, error) {
	const ns, sub = "caddy", "hooks"
	m := &hookMetrics{
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
	}
	var err error
	if m.requests, err = promreg.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.authFailures, err = promreg.Register(reg, m.authFailures); err != nil {
		return nil, err
	}
	if m.dispatch, err = promreg.Register(reg, m.dispatch); err != nil {
		return nil, err
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "active_lockouts",
		Help: "Client addresses currently locked out after repeated auth failures.",
	}, lockouts)
	if _, err = promreg.Register(reg, prometheus.Collector(active)); err != nil {
		return nil, err
	}
	return m, nil
}

// observeRequest counts one answered request.
func (m *hookMetrics) observeRequest(route string, status int) {
	m.requests.WithLabelValues(route, statusLabel(status)).Inc()
}

// observeDispatch records one gateway hand-off.
func (m *hookMetrics) observeDispatch(kind Kind, outcome string, d time.Duration) {
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
