package caddyhook

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"golang.org/x/crypto/bcrypt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// eventPage is a decoded GET /hooks/events answer.
type eventPage struct {
	events []eventlog.EventJSON
	rows   []eventlog.RejectionJSON
	order  []string // "e:<id>" and "r:<client>" in the answer's order
	next   string
}

// listEvents returns GET /hooks/events?<query>.
func (a *testAdmin) listEvents(query string) eventPage {
	a.t.Helper()
	var raw struct {
		Entries []json.RawMessage `json:"entries"`
		Next    string            `json:"next"`
	}
	a.call(http.MethodGet, "/hooks/events?"+query, "", http.StatusOK, &raw)
	p := eventPage{next: raw.Next}
	for _, e := range raw.Entries {
		var typ struct{ Type string }
		_ = json.Unmarshal(e, &typ)
		switch typ.Type {
		case "event":
			var ev eventlog.EventJSON
			if err := json.Unmarshal(e, &ev); err != nil {
				a.t.Fatal(err)
			}
			p.events = append(p.events, ev)
			p.order = append(p.order, "e:"+ev.ID)
		case "rejections":
			var r eventlog.RejectionJSON
			if err := json.Unmarshal(e, &r); err != nil {
				a.t.Fatal(err)
			}
			p.rows = append(p.rows, r)
			p.order = append(p.order, "r:"+r.Client)
		default:
			a.t.Fatalf("entry of type %q: %s", typ.Type, e)
		}
	}
	return p
}

// event returns GET /hooks/events/<id>.
func (a *testAdmin) event(id string) eventlog.EventJSON {
	a.t.Helper()
	var ev eventlog.EventJSON
	a.call(http.MethodGet, "/hooks/events/"+url.PathEscape(id), "", http.StatusOK, &ev)
	return ev
}

// waitState waits until event id's first action is in state.
func (a *testAdmin) waitState(id, state string) eventlog.EventJSON {
	a.t.Helper()
	var ev eventlog.EventJSON
	testkit.WaitForState(a.t, func() string { return fmt.Sprintf("event %s is %q, want %q (%+v)", id, ev.State, state, ev.Dispatch) },
		func() bool { ev = a.event(id); return ev.State == state })
	return ev
}

// TestEventLogRecordsOutcomes: accepted requests are events with their
// dispatch outcome (sent, the gateway's run id), refusals are one row per
// address and reason, a locked address's 429s a row of their own; an
// event shows header names, and values only from the allow-list; bodies
// are off by default, so nothing is replayable. (On main there is no
// /hooks/events: 404.)
func TestEventLogRecordsOutcomes(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: "auth_failures 3 1m"})
	wake := in.post("/hooks/wake", `{"text":"deploy done"}`, "X-Github-Event: push", "X-Secret-Thing: s3cr3t-value")
	agent := in.post("/hooks/agent", `{"message":"summarise"}`, "Idempotency-Key: k-1")
	if wake.status != 200 || agent.status != 200 {
		t.Fatalf("accept: %d %d", wake.status, agent.status)
	}
	runID := agent.json(t)["runId"].(string)
	for range 4 { // 3 failures lock the address, the 4th is a 429
		in.do(http.MethodPost, "/hooks/wake", `{}`, "Authorization: Bearer wrong-token-of-some-length-000000000")
	}
	p := adm.listEvents("")
	if len(p.events) != 2 || len(p.rows) != 2 {
		t.Fatalf("%d events and %d rows: %v", len(p.events), len(p.rows), p.order)
	}
	if p.order[0] != "r:127.0.0.1" || p.order[2] != "e:"+p.events[0].ID {
		t.Fatalf("not newest first: %v", p.order)
	}
	ag, wk := p.events[0], p.events[1]
	if ag.Hook != "agent" || ag.State != eventlog.StateSent || ag.RunID != runID || ag.Dispatch[0].GatewayStatus != 200 ||
		ag.IdemKey != "k-1" || ag.Auth != "token" || ag.Client != "127.0.0.1" || ag.Replayable || ag.BodyKept {
		t.Fatalf("agent event %+v", ag)
	}
	if wk.Hook != "wake" || wk.Status != 200 || wk.State != eventlog.StateSent {
		t.Fatalf("wake event %+v", wk)
	}
	counts := map[int]uint64{}
	for _, r := range p.rows {
		counts[r.Status] += r.Count
	}
	if counts[401] != 3 || counts[429] != 1 {
		t.Fatalf("rows %+v", p.rows)
	}
	d := adm.event(wk.ID)
	shown := map[string]string{}
	for _, h := range d.Headers {
		if h.Shown {
			shown[h.Name] = h.Value
		} else {
			shown[h.Name] = "(hidden)"
		}
	}
	if shown["X-Github-Event"] != "push" || shown["Authorization"] != "(hidden)" || shown["X-Secret-Thing"] != "(hidden)" ||
		shown["Content-Type"] != "application/json" {
		t.Fatalf("headers %v", shown)
	}
	if d.Body != nil {
		t.Fatal("a body was kept with bodies off")
	}
	if st, ans := adm.do(http.MethodPost, "/hooks/events/"+wk.ID+"/replay", ""); st != http.StatusConflict || !strings.Contains(ans, "bodies on") {
		t.Fatalf("replay without bodies: %d %s", st, ans)
	}
	if got := adm.listEvents("status=rejected&limit=1"); len(got.rows) != 1 || len(got.events) != 0 || got.next == "" {
		t.Fatalf("status=rejected&limit=1: %v next %q", got.order, got.next)
	}
	if st, _ := adm.do(http.MethodGet, "/hooks/events?status=bogus", ""); st != http.StatusBadRequest {
		t.Fatalf("a bad filter: %d", st)
	}
	if st, _ := adm.do(http.MethodGet, "/hooks/events/no-such-id", ""); st != http.StatusNotFound {
		t.Fatalf("an unknown id: %d", st)
	}
	var rates eventlog.RatesJSON
	adm.call(http.MethodGet, "/hooks/events/rates", "", http.StatusOK, &rates)
	var acc, rej, locked float64
	for i := range rates.Accepted {
		acc, rej, locked = acc+rates.Accepted[i], rej+rates.Rejected[i], locked+rates.Locked[i]
	}
	if step := float64(rates.StepSeconds); acc*step != 2 || rej*step != 3 || locked*step != 1 {
		t.Fatalf("rates: %v accepted, %v rejected, %v locked", acc*step, rej*step, locked*step)
	}
}

// TestEventReplayAcrossDispatchPaths: with bodies on, replaying an event
// dispatches what the gateway was sent again, through the handler's own
// path, with a new idempotency key derived from the original, in render
// and forward mode, sync, spooled and through the cluster queue; the
// replay is an event of its own naming the original.
func TestEventReplayAcrossDispatchPaths(t *testing.T) {
	nats := natstest.Run(t, natstest.Options{})
	cases := []struct {
		name, hooks, path, body string
		spooled                 bool
	}{
		{"render sync", "", "/hooks/agent", `{"message":"replay me"}`, false},
		{"render spool", "spool " + t.TempDir(), "/hooks/agent", `{"message":"replay me"}`, true},
		{"forward sync", "mode forward", "/hooks/wake", `{"text":"replay me"}`, false},
		{"forward spool", "mode forward\n\t\tspool " + t.TempDir(), "/hooks/agent?x=1", `{"message":"replay me"}`, true},
		{"render cluster queue", clusterLines(nats.URL()) + "\n\t\tspool cluster {\n\t\t\tfallback reject\n\t\t}", "/hooks/agent", `{"message":"replay me"}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, adm := startOpsIngress(t, ingressOpts{hooks: c.hooks + "\n\t\tevents {\n\t\t\tbodies on\n\t\t}"})
			r := in.post(c.path, c.body, "Idempotency-Key: orig-key", "X-Request-Id: rq-1")
			if r.status != 200 {
				t.Fatalf("accept: %d %s", r.status, r.body)
			}
			p := adm.listEvents("status=accepted")
			if len(p.events) != 1 || !p.events[0].Replayable {
				t.Fatalf("events %+v", p.events)
			}
			orig := p.events[0]
			if c.spooled {
				orig = adm.waitState(orig.ID, eventlog.StateDelivered)
			}
			var ans adminapi.Replay
			adm.call(http.MethodPost, "/hooks/events/"+orig.ID+"/replay", "", http.StatusOK, &ans)
			if !ans.OK || ans.ReplayOf != orig.ID || ans.ID == orig.ID || ans.ID == "" {
				t.Fatalf("replay answer %+v", ans)
			}
			rep := adm.event(ans.ID)
			if rep.ReplayOf != orig.ID || rep.Auth != "replay" || rep.Hook != orig.Hook {
				t.Fatalf("replay event %+v", rep)
			}
			if c.spooled {
				adm.waitState(ans.ID, eventlog.StateDelivered)
			}
			var got []string
			testkit.WaitForState(t, func() string { return fmt.Sprintf("gateway received %v", got) }, func() bool {
				got = got[:0]
				for _, rc := range in.gw.Received() {
					if strings.Contains(string(rc.Raw), "replay me") {
						got = append(got, rc.IdempotencyKey)
					}
				}
				return len(got) >= 2
			})
			if len(got) != 2 || got[0] == got[1] || got[1] != ans.ID {
				t.Fatalf("gateway received keys %v, want the original's and %s", got, ans.ID)
			}
			last := in.gw.Received()[len(in.gw.Received())-1]
			if last.Header.Get("Authorization") != "Bearer "+itGatewayToken {
				t.Fatal("the replay lacks the gateway's credentials")
			}
			if strings.HasPrefix(c.name, "forward") && last.Header.Get("X-Request-Id") != "rq-1" {
				t.Fatalf("the forwarded replay lost the sender's headers: %v", last.Header)
			}
		})
	}
}

// TestEventLogNeverHoldsSecrets: whatever carries the hook token (the
// Authorization header, x-service-token, the body, the URL) or a
// signature (a signed delivery's header, a forged one), no event, row,
// detail, stream or file shows it.
func TestEventLogNeverHoldsSecrets(t *testing.T) {
	dir := t.TempDir()
	setSigEnv(t)
	in, adm := startOpsIngress(t, ingressOpts{hooks: fmt.Sprintf(`events {
			bodies on
			dir %s
		}
		mapping github {
			match_path github
			message_template "push to {{repository.full_name}}"
			verify github {
				secret {env.CH_IT_GITHUB_SECRET}
			}
		}`, dir)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := adm.openStream(ctx, "")
	in.post("/hooks/wake", `{"text":"hi"}`)
	in.do(http.MethodPost, "/hooks/wake", `{"text":"svc"}`, "x-service-token: "+itHookToken)
	in.post("/hooks/agent", `{"message":"the token is `+itHookToken+`"}`)
	in.post("/hooks/"+itHookToken, `{}`)
	in.do(http.MethodPost, "/hooks/wake?token="+itHookToken, `{}`)
	in.do(http.MethodPost, "/hooks/wake", `{}`, "X-Hub-Signature-256: sha256=00ff"+itHookToken)
	ghBody := `{"repository":{"full_name":"acme/app"}}`
	sig := "sha256=" + hex.EncodeToString(macOf(sha256.New, []byte(sigGitHubSecret), ghBody))
	if r := in.do(http.MethodPost, "/hooks/github", ghBody, "X-Hub-Signature-256: "+sig, "X-GitHub-Event: push", "X-GitHub-Delivery: d-1"); r.status != 200 {
		t.Fatalf("signed delivery: %d %s", r.status, r.body)
	}
	p := adm.listEvents("")
	if len(p.events) != 4 {
		t.Fatalf("%d events, want 4: %v", len(p.events), p.order)
	}
	gh := adm.event(p.events[0].ID)
	if gh.Auth != "signature github" || gh.IdemKey != "d-1" {
		t.Fatalf("signed event %+v", gh)
	}
	for _, hd := range gh.Headers {
		if hd.Name == "X-Hub-Signature-256" && hd.Shown {
			t.Fatal("the signature's value is shown")
		}
	}
	for _, e := range p.events {
		d := adm.event(e.ID)
		if e.Hook == "agent" && (d.Body == nil || !strings.Contains(*d.Body, "[REDACTED]") || d.Replayable) {
			t.Fatalf("the body holding the token: %+v", d)
		}
	}
	seen := stream.until(t, func(s string) bool { return strings.Count(s, "event: event") >= 4 })
	if strings.Contains(seen, itHookToken) || strings.Contains(seen, sig[7:]) {
		t.Fatal("the live tail carries the token or the signature")
	}
	for _, a := range adm.answers {
		if strings.Contains(a, sig[7:]) {
			t.Fatalf("an admin answer carries the signature: %s", a)
		}
	}
	caddyStopAndWait(t)
	b, err := os.ReadFile(filepath.Join(dir, "events.db"))
	if err != nil || strings.Contains(string(b), itHookToken) || strings.Contains(string(b), itGatewayToken) || strings.Contains(string(b), sig[7:]) {
		t.Fatalf("events.db (%d bytes, %v) holds a secret", len(b), err)
	}
	// adm's cleanup checks every admin answer for the secrets
}

// caddyStopAndWait stops the in-process Caddy (the event log's directory
// is closed by then).
func caddyStopAndWait(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestEventsSurviveReloadAndRestart: a reload (also one that changes the
// event log's bounds) keeps the events; a refused reload changes
// nothing; with dir, a restart of Caddy finds them again.
func TestEventsSurviveReloadAndRestart(t *testing.T) {
	dir := t.TempDir()
	events := func(extra string) string {
		return fmt.Sprintf("events {\n\t\t\tdir %s\n\t\t\t%s\n\t\t}", dir, extra)
	}
	in, adm := startOpsIngress(t, ingressOpts{hooks: events("max_events 50")})
	for i := range 5 {
		if r := in.post("/hooks/wake", fmt.Sprintf(`{"text":"before %d"}`, i)); r.status != 200 {
			t.Fatalf("accept: %d", r.status)
		}
	}
	before := adm.listEvents("").events
	cf := adm.caddyfile(events("max_events 50"))
	if err := in.tryLoad(strings.Replace(cf, "max_events 50", "max_events -1", 1)); err == nil {
		t.Fatal("max_events -1 was accepted")
	}
	if got := adm.listEvents("").events; len(got) != 5 {
		t.Fatalf("after a refused reload: %d events", len(got))
	}
	in.load(strings.Replace(cf, "max_events 50", "max_events 3", 1))
	after := adm.listEvents("").events
	if len(after) != 3 || after[0].ID != before[0].ID {
		t.Fatalf("after the reload to max_events 3: %d events, newest %v (was %v)", len(after), after, before[0].ID)
	}
	if r := in.postAfterReload("/hooks/wake", `{"text":"after"}`); r.status != 200 {
		t.Fatalf("accept after reload: %d", r.status)
	}
	want := adm.listEvents("").events
	caddyStopAndWait(t)
	in.load(cf)
	got := adm.listEvents("").events
	if len(got) != len(want) || got[0].ID != want[0].ID {
		t.Fatalf("after a restart: %d events (newest %s), want %d (newest %s)", len(got), got[0].ID, len(want), want[0].ID)
	}
}

// caddyfile is the test ingress's Caddyfile with the admin endpoint on
// and hooks as the extra lines of the hooks block.
func (a *testAdmin) caddyfile(hooks string) string {
	site := hooksSite(testSiteAddress, itHookToken, a.in.sock, testTransformTimeout+"\n\t\t"+hooks)
	return strings.Replace(a.in.caddyfile(site), "admin off", "admin unix/"+a.sock, 1)
}

// sseReader reads a live tail.
type sseReader struct {
	lines chan string
}

// openStream opens GET /hooks/events/stream?<query>.
func (a *testAdmin) openStream(ctx context.Context, query string) *sseReader {
	a.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/hooks/events/stream?"+query, nil)
	c := &http.Client{Transport: a.c.Transport}
	resp, err := c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		a.t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseReader{lines: make(chan string, 1024)}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s
}

// until reads until done says the text so far is enough (or 10 s).
func (s *sseReader) until(t *testing.T, done func(string) bool) string {
	t.Helper()
	var b strings.Builder
	timeout := time.After(10 * time.Second)
	for !done(b.String()) {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the stream ended; read:\n%s", b.String())
			}
			b.WriteString(l + "\n")
		case <-timeout:
			t.Fatalf("stream: not there after 10s; read:\n%s", b.String())
		}
	}
	return b.String()
}

// TestEventStreamFilters: the live tail sends the new events its filters
// select, and the rejection rows.
func TestEventStreamFilters(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := adm.openStream(ctx, "hook=agent")
	all := adm.openStream(ctx, "")
	in.post("/hooks/wake", `{"text":"w"}`)
	in.post("/hooks/agent", `{"message":"a"}`)
	in.do(http.MethodPost, "/hooks/agent", `{}`, "Authorization: Bearer nope")
	got := agents.until(t, func(s string) bool {
		return strings.Contains(s, "event: rejections") && strings.Contains(s, `"hook":"agent"`)
	})
	if strings.Contains(got, `"hook":"wake"`) {
		t.Fatalf("hook=agent sent a wake:\n%s", got)
	}
	all.until(t, func(s string) bool {
		return strings.Contains(s, `"hook":"wake"`) && strings.Contains(s, `"hook":"agent"`)
	})
}

// TestEventLogOff: events off answers 404 on the event routes and records
// nothing.
func TestEventLogOff(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: "events off"})
	in.post("/hooks/wake", `{"text":"w"}`)
	if st, ans := adm.do(http.MethodGet, "/hooks/events", ""); st != http.StatusNotFound || !strings.Contains(ans, "events off") {
		t.Fatalf("events off: %d %s", st, ans)
	}
}

// TestStreamsEndOnReload: a live tail, on the admin endpoint and on a
// hooks_console site, ends when a reload replaces its config, so the
// reload does not wait for it (Caddy's servers shut down gracefully, with
// no time limit by default), and `caddy hooks tail` reconnects.
func TestStreamsEndOnReload(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{})
	cf := strings.Replace(adm.caddyfile(""), `respond "next handler" 200`, "handle_path /ops/* {\n\t\thooks_console {\n\t\t\tinsecure_no_auth\n\t\t}\n\t}\n\trespond \"next handler\" 200", 1)
	in.load(cf)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	adminStream := adm.openStream(ctx, "")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.base+"/ops/api/events/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("site stream: %v %v", resp, err)
	}
	siteEnded := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); resp.Body.Close(); close(siteEnded) }()
	testkit.WaitForState(t, func() string { return "the streams did not subscribe" }, func() bool {
		lh := liveHandlers()
		return len(lh) == 1 && lh[0].view.events.eventLog().Subscribers() == 2
	})
	loaded := make(chan error, 1)
	go func() { loaded <- in.tryLoad(cf) }()
	select {
	case err := <-loaded:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reload waits for the open live tails")
	}
	select {
	case <-siteEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the site's live tail outlived its config")
	}
	for range adminStream.lines { // until the admin endpoint's stream ends
	}
}

// TestStreamAfterRefusedReload: a reload Caddy refuses leaves the admin
// endpoint's live tail working (Caddy keeps the admin server it started
// for the refused config, whose context ended at once: every tail opened
// on it ended as it began), and such a tail ends when a reload replaces
// the config in force.
func TestStreamAfterRefusedReload(t *testing.T) {
	dir := t.TempDir()
	events := "events {\n\t\t\tdir " + dir + "\n\t\t}"
	in, adm := startOpsIngress(t, ingressOpts{hooks: events})
	cf := adm.caddyfile(events)
	if err := in.tryLoad(strings.Replace(cf, "dir "+dir, "dir "+dir+"\n\t\t\tmax_events -1", 1)); err == nil {
		t.Fatal("max_events -1 was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := adm.openStream(ctx, "")
	if r := in.post("/hooks/wake", `{"text":"after a refused reload"}`); r.status != 200 {
		t.Fatalf("accept: %d %s", r.status, r.body)
	}
	stream.until(t, func(s string) bool { return strings.Contains(s, "event: event") })
	in.load(cf)
	ended := make(chan struct{})
	go func() {
		for range stream.lines { // until the stream ends
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(answerWithin):
		t.Fatal("the live tail outlived the config in force")
	}
}

// TestEventFanOutAndDuplicate: a fan-out (the gmail preset on a batch of
// three messages) is one event with an action per message, each with the
// gateway's run id; its idempotent replay is an event of its own, a
// duplicate answered from the cache, naming the first run.
func TestEventFanOutAndDuplicate(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{hooks: fixturePolicy})
	body := readFixture(t, "gmail-batch.json")
	first := in.post("/hooks/gmail", body, "Idempotency-Key: batch-1")
	if first.status != 200 {
		t.Fatalf("gmail: %d %s", first.status, first.body)
	}
	var reply struct{ RunIDs []string }
	_ = json.Unmarshal([]byte(first.body), &reply)
	if again := in.post("/hooks/gmail", body, "Idempotency-Key: batch-1"); again.body != first.body {
		t.Fatalf("the replay answered %s", again.body)
	}
	p := adm.listEvents("status=accepted")
	if len(p.events) != 2 {
		t.Fatalf("%d events: %v", len(p.events), p.order)
	}
	dup, fan := p.events[0], p.events[1]
	if len(fan.Dispatch) != 3 || len(reply.RunIDs) != 3 {
		t.Fatalf("fan-out event %+v, reply %s", fan, first.body)
	}
	for i, d := range fan.Dispatch {
		if d.State != "sent" || d.RunID != reply.RunIDs[i] || d.Kind != "agent" {
			t.Fatalf("action %d: %+v, want run %s", i, d, reply.RunIDs[i])
		}
		if got := adm.event(d.ID); got.ID != fan.ID {
			t.Fatalf("action id %s finds event %s", d.ID, got.ID)
		}
	}
	if fan.Route != "gmail" || dup.State != "duplicate" || dup.RunID != reply.RunIDs[0] || dup.IdemKey != "batch-1" {
		t.Fatalf("fan-out %+v / duplicate %+v", fan, dup)
	}
}

// TestEventReplayTodaysPolicyAndLockout (issue 34 B14): a replay goes
// through the policy in force when it is asked for, not the one of the
// original request: after a reload that no longer allows what the event
// was sent with (its agent, explicit or the default, a request's session
// key or its prefix, its channel, its model), the replay is refused with
// the policy's reason (409) and the gateway receives nothing, in render
// and forward mode, for a request and a mapping; what the policy still
// allows is replayed (a generated or a mapping's static session key, a
// request forwarded to the gateway's own mappings, which meets the
// gateway's policy). A replay of a client address locked out now is
// refused until the lockout is lifted. Before: the replay sent the kept
// request as it was (after a reload to allowed_agent_ids ops, agentId
// main reached the gateway) whatever the policy and the lockout.
func TestEventReplayTodaysPolicyAndLockout(t *testing.T) {
	const prefixes = "allow_request_session_key\n\t\tallowed_session_key_prefixes hook:"
	mapping := func(lines ...string) string {
		return "mapping m {\n\t\t\tmatch_path m\n\t\t\t" + strings.Join(lines, "\n\t\t\t") + "\n\t\t}"
	}
	cases := []struct {
		name, before, after, path, body string
		refused                         string // "": replayed
	}{
		{"an explicit agent no longer allowed", "agents main ops", "agents main ops\n\t\tallowed_agent_ids ops",
			"/hooks/agent", `{"message":"m","agentId":"main"}`, string(errAgentNotAllowed)},
		{"the default agent no longer allowed", "", "allowed_agent_ids ops",
			"/hooks/agent", `{"message":"m"}`, string(errAgentNotAllowed)},
		{"an agent no longer allowed, forward mode", "mode forward", "mode forward\n\t\tallowed_agent_ids ops",
			"/hooks/agent", `{"message":"m","agentId":"main"}`, string(gatewayReasons[errAgentNotAllowed])}, // in the gateway's words (D17 of issue 35)
		{"a wake's agent no longer allowed", "", "allowed_agent_ids ops",
			"/hooks/wake", `{"text":"t","agentId":"main"}`, string(errAgentNotAllowed)},
		{"a mapping's agent no longer allowed", "agents main ops\n\t\t" + mapping("agent_id main", "message_template x"),
			"agents main ops\n\t\tallowed_agent_ids ops\n\t\t" + mapping("agent_id main", "message_template x"),
			"/hooks/m", `{}`, string(errAgentNotAllowed)},
		{"an agent no longer known", "agents main ops", "agents ops",
			"/hooks/agent", `{"message":"m","agentId":"main"}`, `unknown agentId "main"`},
		{"a request's session key no longer allowed", prefixes, "allowed_session_key_prefixes hook:",
			"/hooks/agent", `{"message":"m","sessionKey":"hook:x"}`, string(errSessionKeyDisabled)},
		{"a session key prefix no longer allowed", prefixes, "allow_request_session_key\n\t\tallowed_session_key_prefixes ops:\n\t\tdefault_session_key ops:main",
			"/hooks/agent", `{"message":"m","sessionKey":"hook:x"}`, "sessionKey must start with one of: ops:"},
		{"a channel no longer listed", "", "channels last whatsapp",
			"/hooks/agent", `{"message":"m","channel":"telegram","to":"42"}`, "channel must be last|whatsapp"},
		{"a model no longer allowed", "allowed_models openai/gpt-5", "allowed_models anthropic/claude-opus-4",
			"/hooks/agent", `{"message":"m","model":"openai/gpt-5"}`, string(errModelNotAllowed)},
		{"still allowed: a generated session key", "", "allowed_agent_ids main",
			"/hooks/agent", `{"message":"m"}`, ""},
		{"still allowed: a mapping's static key", mapping("session_key hook:static", "message_template x"),
			"allowed_agent_ids main\n\t\t" + mapping("session_key hook:static", "message_template x"), "/hooks/m", `{}`, ""},
		{"the gateway's policy: a forward mapping", "agents main ops\n\t\t" + mapping("forward"),
			"agents main ops\n\t\tallowed_agent_ids ops\n\t\t" + mapping("forward"), "/hooks/m", `{"agentId":"main"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const events = "\n\t\tevents {\n\t\t\tbodies on\n\t\t}"
			in, adm := startOpsIngress(t, ingressOpts{hooks: c.before + events})
			if r := in.post(c.path, c.body); r.status != 200 {
				t.Fatalf("accept: %d %s", r.status, r.body)
			}
			p := adm.listEvents("status=accepted")
			if len(p.events) != 1 || !p.events[0].Replayable {
				t.Fatalf("events %+v", p.events)
			}
			in.reloadTo(adm.caddyfile(c.after+events), nil)
			sent := len(in.gw.Received())
			st, ans := adm.do(http.MethodPost, "/hooks/events/"+p.events[0].ID+"/replay", "")
			if c.refused == "" {
				if st != http.StatusOK {
					t.Fatalf("replay: %d %s, want 200", st, ans)
				}
				testkit.WaitForState(t, func() string { return "the replay never reached the gateway" }, func() bool { return len(in.gw.Received()) > sent })
				return
			}
			var refusal struct{ Error string }
			_ = json.Unmarshal([]byte(ans), &refusal)
			if st != http.StatusConflict || !strings.Contains(refusal.Error, "today's policy refuses it: "+c.refused) {
				t.Fatalf("replay after the reload: %d %s, want 409 naming %q", st, ans, c.refused)
			}
			if got := in.gw.Received(); len(got) != sent {
				t.Fatalf("the gateway received the refused replay: %s", got[len(got)-1].Raw)
			}
		})
	}
	t.Run("a client address locked out now", func(t *testing.T) {
		in, adm := startOpsIngress(t, ingressOpts{hooks: "auth_failures 2\n\t\tevents {\n\t\t\tbodies on\n\t\t}"})
		if r := in.post("/hooks/agent", `{"message":"m"}`); r.status != 200 {
			t.Fatalf("accept: %d %s", r.status, r.body)
		}
		id := adm.listEvents("status=accepted").events[0].ID
		for range 2 {
			in.do(http.MethodPost, "/hooks/agent", `{"message":"m"}`, "Authorization: Bearer wrong-token-0123456789abcdefghijklmnop")
		}
		sent := len(in.gw.Received())
		if st, ans := adm.do(http.MethodPost, "/hooks/events/"+id+"/replay", ""); st != http.StatusConflict || !strings.Contains(ans, "is locked out") {
			t.Fatalf("replay from a locked address: %d %s, want 409", st, ans)
		}
		if len(in.gw.Received()) != sent {
			t.Fatal("the gateway received the refused replay")
		}
		adm.call(http.MethodDelete, "/hooks/lockouts/127.0.0.1", "", http.StatusOK, nil)
		adm.call(http.MethodPost, "/hooks/events/"+id+"/replay", "", http.StatusOK, nil)
	})
}

// TestOperatorActionsRecorded (issue 32 item 4): every operator's action
// on the admin API (unlock, retry, drop, pause, resume, replay) is an
// entry of the event log with who did it: the console's authenticated
// user, or the admin endpoint; status=operator lists them and nothing
// else, and they count in no rate.
func TestOperatorActionsRecorded(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{})
	hash, err := bcrypt.GenerateFromPassword([]byte("op-password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	in.load(strings.Replace(adm.caddyfile(fmt.Sprintf(`auth_failures 3 1m
		spool %s {
			retry_initial 50ms
		}
		events {
			bodies on
		}`, t.TempDir())), `respond "next handler" 200`, fmt.Sprintf(`handle_path /ops/* {
		basic_auth {
			op %s
		}
		hooks_console
	}
	respond "next handler" 200`, hash), 1))
	basic := []string{"Authorization", "Basic b3A6b3AtcGFzc3dvcmQ="} // op:op-password
	_, _, page := consoleReq(t, "GET", in.base+"/ops/", basic...)
	m := regexp.MustCompile(`name="hooks-csrf" content="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	console := func(method, route, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, in.base+"/ops/api/"+route, strings.NewReader(body))
		req.Header.Set("Authorization", basic[1])
		req.Header.Set("X-Hooks-Csrf", m[1])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("console %s %s: %d %s", method, route, resp.StatusCode, b)
		}
	}
	// through the admin endpoint: unlock, replay, drop
	for range 3 {
		in.do(http.MethodPost, "/hooks/wake", `{}`, "Authorization: Bearer wrong-token-000000000000000000000000")
	}
	adm.call(http.MethodDelete, "/hooks/lockouts/127.0.0.1", "", http.StatusOK, nil)
	id := in.post("/hooks/agent", `{"message":"replayed"}`).json(t)["runId"].(string)
	adm.waitState(id, "delivered")
	adm.call(http.MethodPost, "/hooks/events/"+id+"/replay", "", http.StatusOK, nil)
	adm.call(http.MethodPost, "/hooks/spool/dead/drop", `{"all":true}`, http.StatusOK, nil)
	// through the console: pause, resume, retry
	console(http.MethodPost, "spool/pause", "{}")
	console(http.MethodPost, "spool/resume", "{}")
	in.gw.FailWith(func(string) int { return http.StatusUnprocessableEntity })
	dead := in.post("/hooks/agent", `{"message":"dead"}`).json(t)["runId"].(string)
	adm.waitState(dead, "dead")
	in.gw.FailWith(nil)
	console(http.MethodPost, "spool/dead/retry", `{"ids":["`+dead+`"]}`)

	var page2 struct {
		Entries []eventlog.EventJSON `json:"entries"`
	}
	adm.call(http.MethodGet, "/hooks/events?status=operator", "", http.StatusOK, &page2)
	got := map[string]string{}
	for _, e := range page2.Entries {
		if e.Type != eventlog.TypeOperator {
			t.Errorf("status=operator listed a %s", e.Type)
		}
		got[e.Action] = e.Operator + " on " + e.Target + ": " + e.Reason
	}
	for action, want := range map[string]string{
		"unlock": "admin API on 127.0.0.1", "replay": "admin API on " + id, "drop": "admin API on all dead letters: dropped 0 dead letters",
		"pause": "user op on delivery from", "resume": "user op on delivery from", "retry": "user op on " + dead + ": retried 1 dead letter",
	} {
		if !strings.HasPrefix(got[action], want) {
			t.Errorf("%s: recorded %q, want it to start %q", action, got[action], want)
		}
	}
	if n := len(adm.listEvents("status=accepted").events); n != 3 { // the replayed, its replay, the dead one
		t.Errorf("status=accepted lists %d entries, want the 3 events and no operator's action", n)
	}
}
