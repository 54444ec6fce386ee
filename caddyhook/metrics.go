package caddyhook

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/promreg"
	"github.com/caddyhook/caddyhook/internal/version"
)

// hookMetrics are the handler's Prometheus collectors on Caddy's registry.
type hookMetrics struct {
	requests     *prometheus.CounterVec
	authFailures prometheus.Counter
	// handshakes counts the providers' endpoint handshakes by provider
	// and outcome (answered, refused, unavailable).
	handshakes     *prometheus.CounterVec
	dispatch       *prometheus.HistogramVec
	activeLockouts prometheus.GaugeFunc
	// forwardedUnparsed counts requests keyed on a trusted hop because
	// the forwarded entry it wrote is not an address (clientAddressCheck.address).
	forwardedUnparsed prometheus.Counter
	// lockouts are the tables activeLockouts counts.
	lockouts *lockoutTables
	// buildInfo is caddy_hooks_build_info; unreadable counts the records
	// the stores kept because a newer release wrote them.
	buildInfo  prometheus.Collector
	unreadable *version.Unreadable
}

// holdMetrics takes the collectors from the usage pool, so that the
// counters keep counting across config reloads (each config has its own
// registry), and registers them on this config's registry.
func holdMetrics(held *poolHold, reg prometheus.Registerer) (*hookMetrics, error) {
	m, _, err := hold(held, metricsPoolKey, func() (*hookMetrics, error) { return newHookMetrics(), nil })
	if err != nil {
		return nil, err
	}
	return m, m.register(reg)
}

// newHookMetrics returns the collectors, not yet registered.
func newHookMetrics() *hookMetrics {
	const ns, sub = "caddy", "hooks"
	lockouts := &lockoutTables{by: map[string][]*lockout.Table{}}
	return &hookMetrics{
		lockouts: lockouts,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Hook requests by route and response status.",
		}, []string{"route", "code"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "auth_failures_total",
			Help: "Hook requests refused for a missing or wrong token or signature.",
		}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "handshakes_total",
			Help: "Provider endpoint handshakes by provider and outcome: answered at the edge, refused (authentication failed), unavailable (could not be completed, 503).",
		}, []string{"provider", "outcome"}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "dispatch_duration_seconds",
			Help:    "Time to hand one action to the gateway, by kind and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"kind", "outcome"}),
		activeLockouts: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "active_lockouts",
			Help: "Client addresses currently locked out after repeated auth failures.",
		}, lockouts.active),
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
	for _, c := range []prometheus.Collector{m.requests, m.authFailures, m.handshakes, m.dispatch, m.activeLockouts, m.forwardedUnparsed,
		m.buildInfo, m.unreadable.Collector()} {
		if _, err := promreg.Register(reg, c); err != nil {
			return err
		}
	}
	return nil
}

// Destruct implements caddy.Destructor for the usage pool.
func (*hookMetrics) Destruct() error { return nil }

// lockoutTables are the lockout tables of the provisioned handlers, by
// handler identity, for the active_lockouts gauge. An identity's newest
// table is the running one: a table made for changed lockout settings
// takes over the addresses of the identity's older one, which stays until
// the old config is cleaned up.
type lockoutTables struct {
	mu sync.Mutex
	by map[string][]*lockout.Table // one entry per handler holding it, oldest first
}

// add counts t, the table of a handler of identity, until remove.
func (s *lockoutTables) add(identity string, t *lockout.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.by[identity] = append(s.by[identity], t)
}

// remove undoes one add.
func (s *lockoutTables) remove(identity string, t *lockout.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.by[identity]
	if i := slices.Index(ts, t); i >= 0 {
		ts = slices.Delete(ts, i, i+1)
	}
	if len(ts) == 0 {
		delete(s.by, identity)
	} else {
		s.by[identity] = ts
	}
}

// active counts the locked addresses of each identity's newest table.
func (s *lockoutTables) active() float64 {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ts := range s.by {
		n += ts[len(ts)-1].Active(now)
	}
	return float64(n)
}

// observeAuthFailure counts one authentication failure.
func (m *hookMetrics) observeAuthFailure() { m.authFailures.Inc() }

// observeForwardedUnparsed counts one request keyed on a trusted hop.
func (m *hookMetrics) observeForwardedUnparsed() { m.forwardedUnparsed.Inc() }

// countLockouts counts the locked addresses of table, the lockout table
// of a handler of identity, in active_lockouts until the returned
// function is called (once).
func (m *hookMetrics) countLockouts(identity string, table *lockout.Table) (stop func()) {
	m.lockouts.add(identity, table)
	var once sync.Once
	return func() { once.Do(func() { m.lockouts.remove(identity, table) }) }
}

// countUnreadable counts n records of store that a newer release (its
// format version v) wrote: they are kept, unread.
func (m *hookMetrics) countUnreadable(store string, v, n int) { m.unreadable.Add(store, v, n) }

// unreadableRecords is that counter, for the cluster engine's records.
func (m *hookMetrics) unreadableRecords() *version.Unreadable { return m.unreadable }

// observeRequest counts one answered request.
func (m *hookMetrics) observeRequest(route string, status int) {
	m.requests.WithLabelValues(route, statusLabel(status)).Inc()
}

// Outcomes of caddy_hooks_handshakes_total.
const (
	handshakeAnswered    = "answered"
	handshakeRefused     = "refused"
	handshakeUnavailable = "unavailable"
)

// observeHandshake counts one endpoint handshake of provider: answered
// (herr nil) or refused or unavailable (herr's status 503).
func (m *hookMetrics) observeHandshake(provider string, herr *hookError) {
	outcome := handshakeAnswered
	switch {
	case herr == nil:
	case herr.status == http.StatusServiceUnavailable:
		outcome = handshakeUnavailable
	default:
		outcome = handshakeRefused
	}
	m.handshakes.WithLabelValues(provider, outcome).Inc()
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
