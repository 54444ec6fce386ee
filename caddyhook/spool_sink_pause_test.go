package caddyhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestIntegrationPauseHoldsPastMaxAge (issue 21 item 3), as reported:
// max_age 1s, delivery paused through the admin API, an event accepted,
// 1.5 s later delivery resumed: the event reaches the gateway instead of
// the dead letters ("expired: older than max_age", 0 attempts).
func TestIntegrationPauseHoldsPastMaxAge(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + t.TempDir() + ` {
			max_age 1s
		}`})
	adm.call(http.MethodPost, "/hooks/spool/pause", "", http.StatusOK, nil)
	if r := in.post("/hooks/agent", `{"message":"held for maintenance"}`); r.status != 200 {
		t.Fatalf("accept while paused: %d %s", r.status, r.body)
	}
	accepted := time.Now()
	testkit.WaitForState(t, func() string { return "1.5 s to pass" }, func() bool { return time.Since(accepted) > 1500*time.Millisecond })
	adm.call(http.MethodPost, "/hooks/spool/resume", "", http.StatusOK, nil)
	testkit.WaitForState(t, func() string { return fmt.Sprintf("not delivered; dead letters %+v", adm.dead("")) },
		func() bool { return in.gw.Count("agent") == 1 })
	if dead := adm.dead(""); len(dead) != 0 {
		t.Fatalf("dead letters after the resume: %+v", dead)
	}
}

// TestExpiredEventShownDead (issue 22 follow-up): an event the gateway
// keeps refusing with a retryable status goes to the dead letters past
// max_age; its event then says dead, "expired: older than max_age",
// instead of staying "retrying" — with a local spool, and in a cluster on
// the edge that accepted it while another node delivered. (Before, the
// spool dead-lettered it without a word to the event log.)
func TestExpiredEventShownDead(t *testing.T) {
	t.Run("local spool", func(t *testing.T) {
		in, adm := startOpsIngress(t, ingressOpts{hooks: `spool ` + t.TempDir() + ` {
			max_age 1s
			retry_initial 50ms
			retry_max 200ms
		}`})
		in.gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
		r := in.post("/hooks/agent", `{"message":"never taken"}`)
		if r.status != 200 {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
		id := r.json(t)["runId"].(string)
		ev := adm.waitState(id, eventlog.StateDead)
		if d := ev.Dispatch[0]; d.Error != spool.ReasonExpired || d.Attempts < 1 {
			t.Errorf("expired event: %+v; want error %q after at least one attempt", d, spool.ReasonExpired)
		}
		if dead := adm.dead(""); len(dead) != 1 {
			t.Errorf("dead letters: %+v, want the expired event", dead)
		}
	})
	t.Run("cluster edge", func(t *testing.T) {
		gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
		gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
		c := startEdgesAndDeliverer(t, 2, gw, "retry_initial 50ms\n retry_max 200ms\n max_age 1s")
		id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"never taken"}`))
		d := c.waitClusterState(t, 0, id, eventlog.StateDead)
		if deliverer := c.handler(t, 1).cluster.backend.Node(); d.Error != spool.ReasonExpired || d.Node != deliverer {
			t.Errorf("node 0's expired event: %+v; want error %q from node %q", d, spool.ReasonExpired, deliverer)
		}
	})
}
