package caddyhook

import (
	"fmt"
	"net/http"
	"testing"
	"time"
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
	waitFor(t, func() string { return "1.5 s to pass" }, func() bool { return time.Since(accepted) > 1500*time.Millisecond })
	adm.call(http.MethodPost, "/hooks/spool/resume", "", http.StatusOK, nil)
	waitFor(t, func() string { return fmt.Sprintf("not delivered; dead letters %+v", adm.dead("")) },
		func() bool { return in.gw.Count("agent") == 1 })
	if dead := adm.dead(""); len(dead) != 0 {
		t.Fatalf("dead letters after the resume: %+v", dead)
	}
}
