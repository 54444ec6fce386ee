// Package promtest reads the value of a Prometheus series, for tests.
package promtest

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value reads the counter or gauge name from g, of the series whose labels
// include every name=value pair of labels (the only series when labels is
// empty); ok is false when there is no such series.
func Value(g prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(labels) == 0 && len(mf.GetMetric()) != 1 || !hasLabels(m.GetLabel(), labels) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// hasLabels reports whether got holds every name, value pair of want.
func hasLabels(got []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range got {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
