package spool

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// gathered returns the value of every metric family in reg by name.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_GAUGE:
			out[mf.GetName()] = m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			out[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestMetricsFollowStats(t *testing.T) {
	s1 := openTest(t, testConfig(t))
	s2 := openTest(t, testConfig(t))
	mustAppend(t, s2, newEvent(KindAgent, "a"), newEvent(KindWake, "b"))
	snd := &fakeSender{respond: func(ev *Event, _ int) (int, string, error) {
		if ev.ID == "a" {
			return 400, "no", nil
		}
		return 200, "", nil
	}}
	s2.SetSender(snd)
	testkit.WaitFor(t, "settled", func() bool { return s2.Stats().Depth == 0 })
	s2.SetSender(nil)
	mustAppend(t, s2, newEvent(KindAgent, "pending"))

	reg := prometheus.NewPedanticRegistry()
	if err := RegisterMetrics(reg, s1); err != nil {
		t.Fatal(err)
	}
	if err := RegisterMetrics(reg, s2); err != nil { // a reload rebinds, no error
		t.Fatalf("second RegisterMetrics: %v", err)
	}
	st := s2.Stats()
	got := gathered(t, reg)
	want := map[string]float64{
		"caddy_hooks_spool_depth":              float64(st.Depth),
		"caddy_hooks_spool_bytes":              float64(st.Bytes),
		"caddy_hooks_spool_max_bytes":          float64(st.MaxBytes),
		"caddy_hooks_spool_dead_letters":       1,
		"caddy_hooks_spool_deliveries_total":   1,
		"caddy_hooks_spool_retries_total":      0,
		"caddy_hooks_spool_dead_letters_total": 1,
		"caddy_hooks_spool_appended_total":     3,
		"caddy_hooks_spool_commits_total":      float64(st.Commits),
	}
	if st.Depth != 1 {
		t.Fatalf("depth %d, want 1", st.Depth)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if _, ok := got["caddy_hooks_spool_oldest_age_seconds"]; !ok {
		t.Error("oldest age missing")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	empty := prometheus.NewPedanticRegistry()
	empty.MustRegister(NewCollector(nil))
	if got := gathered(t, empty); len(got) != 0 {
		t.Fatalf("unbound collector reported %v", got)
	}
}

func TestRegisterMetricsForeignConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "caddy_hooks_spool_depth", Help: "someone else"})
	reg.MustRegister(other)
	if err := RegisterMetrics(reg, openTest(t, testConfig(t))); err == nil {
		t.Fatal("registering over a foreign collector with the same name succeeded")
	}
}
