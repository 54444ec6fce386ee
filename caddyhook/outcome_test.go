package caddyhook

import (
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// TestApplyOutcome: how an outcome from any node changes an event's
// dispatch, whatever order outcomes arrive in: the same outcome twice
// (a node's own, coming back) changes nothing; a delivered event stays
// delivered (a late retry report, an operator's retry the delivery
// overtook); an operator's action applies to what is not delivered.
func TestApplyOutcome(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	t1 := t0.Add(time.Second)
	delivered := cluster.Outcome{ID: "e", State: eventlog.StateDelivered, Attempts: 2, GatewayStatus: 200, RunID: "r"}
	retrying := cluster.Outcome{ID: "e", State: eventlog.StateRetrying, Attempts: 1, GatewayStatus: 503, Error: "gateway status 503: busy"}
	dead := cluster.Outcome{ID: "e", State: eventlog.StateDead, Attempts: 1, GatewayStatus: 400, Error: "gateway status 400: no"}
	for _, tc := range []struct {
		name    string
		from    eventlog.Dispatch
		o       cluster.Outcome
		changed bool
		want    eventlog.Dispatch
	}{
		{"queued, delivered", eventlog.Dispatch{ID: "e", State: eventlog.StateQueued, Updated: t0}, delivered, true,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 2, GatewayStatus: 200, RunID: "r", Node: "n2", Updated: t1}},
		{"the same again", eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 2, GatewayStatus: 200, RunID: "r", Node: "n2", Updated: t0}, delivered, false,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 2, GatewayStatus: 200, RunID: "r", Node: "n2", Updated: t0}},
		{"late retry report", eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 2, RunID: "r", Updated: t0}, retrying, false,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 2, RunID: "r", Updated: t0}},
		{"retrying", eventlog.Dispatch{ID: "e", State: eventlog.StateQueued, Updated: t0}, retrying, true,
			eventlog.Dispatch{ID: "e", State: eventlog.StateRetrying, Attempts: 1, GatewayStatus: 503, Error: "gateway status 503: busy", Node: "n2", Updated: t1}},
		{"dead", eventlog.Dispatch{ID: "e", State: eventlog.StateRetrying, Attempts: 1, Updated: t0}, dead, true,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDead, Attempts: 1, GatewayStatus: 400, Error: "gateway status 400: no", Node: "n2", Updated: t1}},
		{"retried", eventlog.Dispatch{ID: "e", State: eventlog.StateDead, Attempts: 1, Updated: t0}, cluster.Outcome{ID: "e", State: eventlog.StateQueued}, true,
			eventlog.Dispatch{ID: "e", State: eventlog.StateQueued, Attempts: 1, Updated: t1}},
		{"retry overtaken by its delivery", eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 1, Updated: t0}, cluster.Outcome{ID: "e", State: eventlog.StateQueued}, false,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDelivered, Attempts: 1, Updated: t0}},
		{"dropped", eventlog.Dispatch{ID: "e", State: eventlog.StateDead, Updated: t0}, cluster.Outcome{ID: "e", State: eventlog.StateDropped}, true,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDropped, Updated: t1}},
		{"dropped stays dropped", eventlog.Dispatch{ID: "e", State: eventlog.StateDropped, Updated: t0}, cluster.Outcome{ID: "e", State: eventlog.StateQueued}, false,
			eventlog.Dispatch{ID: "e", State: eventlog.StateDropped, Updated: t0}},
	} {
		d := tc.from
		if got := applyOutcome(&d, "n2", t1, tc.o); got != tc.changed || d != tc.want {
			t.Errorf("%s: changed %v, %+v; want %v, %+v", tc.name, got, d, tc.changed, tc.want)
		}
	}
}
