package version

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// NewBuildInfo is the caddy_hooks_build_info gauge: 1, labelled with the
// release, the cluster level, the admin API's version, the Go version and
// the VCS revision (empty when not built from a checkout).
func NewBuildInfo() prometheus.Collector {
	b := Info()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "caddy", Subsystem: "hooks", Name: "build_info",
		Help: "caddyhook's build: always 1, labelled with the release version, the cluster level, the admin API version, the Go version and the VCS revision.",
	}, []string{"version", "cluster_level", "api", "go_version", "revision"})
	g.WithLabelValues(b.Version, strconv.Itoa(b.ClusterLevel), strconv.Itoa(b.API), b.GoVersion, b.Revision).Set(1)
	return g
}

// Unreadable counts the records a store kept without reading them because
// a newer release wrote them (caddy_hooks_records_unreadable_total{store,
// version}): left in place, for that release (a rollback) to read. Its
// methods do nothing on a nil *Unreadable.
type Unreadable struct {
	vec *prometheus.CounterVec
}

// NewUnreadable returns the counter, not yet registered.
func NewUnreadable() *Unreadable {
	return &Unreadable{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "caddy", Subsystem: "hooks", Name: "records_unreadable_total",
		Help: "Records kept unread because a newer release wrote them (a rollback), by store and format version; each time one is met.",
	}, []string{"store", "version"})}
}

// Collector is what to register.
func (u *Unreadable) Collector() prometheus.Collector { return u.vec }

// Add counts n records of store in format version.
func (u *Unreadable) Add(store string, version, n int) {
	if u == nil || n <= 0 {
		return
	}
	u.vec.WithLabelValues(store, strconv.Itoa(version)).Add(float64(n))
}
