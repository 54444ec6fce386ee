package caddyhook

import (
	"fmt"
	"net/http"
	"strings"
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

// TestExpiredEventShownDead (issue 22 follow-up, issue 32 item 3): an
// event the gateway keeps refusing with a retryable status goes to the
// dead letters past max_age; its event then says dead, and keeps what
// killed it ("expired after N attempts; last: gateway status 503: …",
// the gateway's 503), instead of staying "retrying" — with a local
// spool, and in a cluster on the edge that accepted it while another
// node delivered. So does the dead letter's reason. (Before, the spool
// dead-lettered it without a word to the event log; then with
// "expired: older than max_age" and nothing of the cause.)
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
		if d := ev.Dispatch[0]; !keepsCause(d.Error) || d.Attempts < 1 || d.GatewayStatus != http.StatusServiceUnavailable {
			t.Errorf("expired event: %+v; want it expired after its attempts, with the last 503", d)
		}
		if ev.Error != ev.Dispatch[0].Error {
			t.Errorf("the event's error %q is not its action's", ev.Error)
		}
		if dead := adm.dead(""); len(dead) != 1 || !keepsCause(dead[0].Reason) {
			t.Errorf("dead letters: %+v, want the expired event with its cause", dead)
		}
	})
	t.Run("cluster edge", func(t *testing.T) {
		gw := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
		gw.FailWith(func(string) int { return http.StatusServiceUnavailable })
		c := startEdgesAndDeliverer(t, 2, gw, "retry_initial 50ms\n retry_max 200ms\n max_age 1s")
		id := runIDOf(t, c.nodes[0].post("/hooks/agent", `{"message":"never taken"}`))
		d := c.waitClusterState(t, 0, id, eventlog.StateDead)
		if deliverer := c.handler(t, 1).cluster.backend.Node(); !keepsCause(d.Error) || d.Node != deliverer ||
			d.GatewayStatus != http.StatusServiceUnavailable {
			t.Errorf("node 0's expired event: %+v; want it expired with the last 503, from node %q", d, deliverer)
		}
	})
}

// keepsCause reports whether an expired dead letter's reason says what
// its last attempt got (the devgateway's 503).
func keepsCause(reason string) bool {
	return spool.IsExpired(reason) && strings.HasPrefix(reason, "expired after ") && strings.Contains(reason, "; last: gateway status 503")
}
