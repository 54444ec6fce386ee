//go:build openclaw

package e2e

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestRealGateway runs the real openclaw gateway on loopback, checks the
// hooks contract against it directly, then puts caddyhook (a real Caddy
// process) in front of it and runs the ingress cases, including a gateway
// outage and restart. The phases share one gateway because it takes
// several seconds to start.
func TestRealGateway(t *testing.T) {
	inst := locateOpenclaw(t)
	t.Logf("gateway package: %s at %s; install/locate took %v", inst.version(t), inst.openclaw, inst.took.Round(time.Millisecond))
	gw := newOpenclawGateway(t, inst)

	t.Run("gateway", func(t *testing.T) { testGatewayDirect(t, gw) })
	t.Run("caddyhook", func(t *testing.T) { testCaddyhookFront(t, gw) })

	for i, d := range gw.startups {
		t.Logf("gateway start %d: ready in %v", i+1, d.Round(time.Millisecond))
	}
}

// testGatewayDirect pins the reference behaviour the ingress is built to:
// the reply shapes and errors of the real gateway, and that the harness
// can stop and restart it.
func testGatewayDirect(t *testing.T, gw *openclawGateway) {
	direct := newHookClient(gw.baseURL()+"/hooks", gw.hooksToken, "")
	tag := randomToken(t)[:12]

	t.Run("wake", func(t *testing.T) {
		r := direct.post(t, "/wake", map[string]any{"text": "e2e direct wake " + tag})
		wantStatus(t, "wake", r, http.StatusOK)
		if r.json["ok"] != true || r.str("mode") != "now" || r.str("eventOutcome") != "queued" {
			t.Fatalf("wake reply %s, want ok, mode now, eventOutcome queued", r.body)
		}
	})

	t.Run("agent and idempotent replay", func(t *testing.T) {
		key := "e2e-direct-" + tag
		body := map[string]any{"message": "e2e direct agent " + tag, "name": "E2E", "sessionKey": "hook:e2e:" + tag, "deliver": false}
		first := direct.post(t, "/agent", body, "Idempotency-Key", key)
		wantStatus(t, "agent", first, http.StatusOK)
		if !uuidPattern.MatchString(first.str("runId")) {
			t.Fatalf("agent reply %s: want a runId", first.body)
		}
		again := direct.post(t, "/agent", body, "Idempotency-Key", key)
		if again.str("runId") != first.str("runId") {
			t.Fatalf("replay runId %q, want the first %q", again.str("runId"), first.str("runId"))
		}
		body["message"] = "a different message " + tag
		other := direct.post(t, "/agent", body, "Idempotency-Key", key)
		if other.str("runId") == "" || other.str("runId") == first.str("runId") {
			t.Fatalf("same key, different action: runId %q, want a new run (keyed on key + action)", other.str("runId"))
		}
	})

	t.Run("gmail fan-out", func(t *testing.T) {
		key := "e2e-gmail-" + tag
		first := direct.post(t, "/gmail", gmailPush("direct-"+tag, 3), "Idempotency-Key", key)
		wantStatus(t, "gmail", first, http.StatusOK)
		ids := first.strs("runIds")
		if len(ids) != 3 || first.num("dispatched") != 3 || first.str("runId") != ids[0] || !distinct(ids) {
			t.Fatalf("gmail reply %s, want runId = runIds[0], 3 distinct runIds, dispatched 3", first.body)
		}
		again := direct.post(t, "/gmail", gmailPush("direct-"+tag, 3), "Idempotency-Key", key)
		if !slices.Equal(again.strs("runIds"), ids) {
			t.Fatalf("gmail replay runIds %v, want %v", again.strs("runIds"), ids)
		}
	})

	t.Run("rejections", func(t *testing.T) {
		big := bytes.Repeat([]byte("a"), 300<<10)
		cases := []struct {
			name    string
			req     request
			token   string // "" keeps the hooks token
			status  int
			jsonErr string // the {"ok":false,"error":…} reason; "" when the body is not JSON
		}{
			{"wake without text", request{sub: "/wake", body: map[string]any{"text": "  "}}, "", 400, "text required"},
			{"agent without message", request{sub: "/agent", body: map[string]any{}}, "", 400, "message required"},
			{"channel without to", request{sub: "/agent", body: map[string]any{"message": "x", "channel": "last"}}, "", 400, "channel and to must be set together for hook delivery"},
			{"to without channel", request{sub: "/agent", body: map[string]any{"message": "x", "to": "123"}}, "", 400, "channel and to must be set together for hook delivery"},
			{"unknown channel", request{sub: "/agent", body: map[string]any{"message": "x", "channel": "bogus"}}, "", 400, "channel must be last"},
			{"empty model", request{sub: "/agent", body: map[string]any{"message": "x", "model": ""}}, "", 400, "model required"},
			{"session key prefix", request{sub: "/agent", body: map[string]any{"message": "x", "sessionKey": "other:1"}}, "", 400, "sessionKey must start with one of: hook:"},
			{"unknown agent id", request{sub: "/agent", body: map[string]any{"message": "x", "agentId": "nope"}}, "", 400, `unknown agentId "nope"`},
			{"too large", request{sub: "/wake", body: append(append([]byte(`{"text":"`), big...), `"}`...)}, "", 413, "payload too large"},
			{"query token", request{sub: "/wake?token=x", body: map[string]any{"text": "x"}}, "", 400, ""},
			{"wrong token", request{sub: "/wake", body: map[string]any{"text": "x"}}, "wrong", 401, ""},
			{"forwarded header from loopback", request{sub: "/wake", body: map[string]any{"text": "x"}, headers: map[string]string{"X-Forwarded-For": "203.0.113.9"}}, "", 403, ""},
			{"unknown hook", request{sub: "/nothing", body: map[string]any{}}, "", 404, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := direct
				if tc.token != "" {
					c = direct.withToken(tc.token)
				}
				r := c.do(t, tc.req)
				if tc.jsonErr != "" {
					wantError(t, tc.name, r, tc.status, tc.jsonErr)
					return
				}
				wantStatus(t, tc.name, r, tc.status)
			})
		}
	})

	t.Run("lockout", func(t *testing.T) {
		// From its own loopback address, so the other cases are unaffected.
		bad := newHookClient(gw.baseURL()+"/hooks", "wrong-token", "127.0.0.3")
		for i := 1; i <= 20; i++ {
			wantStatus(t, "failure "+strconv.Itoa(i), bad.post(t, "/wake", map[string]any{"text": "x"}), http.StatusUnauthorized)
		}
		r := bad.post(t, "/wake", map[string]any{"text": "x"})
		wantStatus(t, "21st failure", r, http.StatusTooManyRequests)
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
			t.Fatalf("Retry-After %q, want whole seconds in [1,60]", r.header.Get("Retry-After"))
		}
		// Reference behaviour: the token is compared before the lockout,
		// so the right token still gets in (caddyhook is stricter).
		good := bad.withToken(gw.hooksToken)
		wantStatus(t, "right token while locked", good.post(t, "/wake", map[string]any{"text": "after lockout " + tag}), http.StatusOK)
	})

	t.Run("stop and restart", func(t *testing.T) {
		gw.Stop()
		if r, err := direct.send(request{sub: "/wake", body: map[string]any{"text": "x"}}); err == nil {
			t.Fatalf("stopped gateway answered %d", r.status)
		}
		gw.Start(t)
		r := direct.post(t, "/wake", map[string]any{"text": "after restart " + tag})
		wantStatus(t, "wake after restart", r, http.StatusOK)
	})
}

// testCaddyhookFront runs caddyhook in front of the gateway: site 0 talks
// to the gateway directly over loopback TCP, site 1 through a tap that
// records what reaches the gateway, and site 2 spools through a second tap.
func testCaddyhookFront(t *testing.T, gw *openclawGateway) {
	bin := testkit.CaddyBinary(t)
	tap := newGatewayTap(t, gw.addr())
	spoolTap := newGatewayTap(t, gw.addr())
	tag := randomToken(t)[:12]

	features := []string{"agents main ops", "presets gmail"}
	// fast retries keep the outage case short
	spool := "spool " + t.TempDir() + " {\n\tretry_initial 200ms\n\tretry_max 2s\n}"
	cfg := edgeConfig{edgeToken: randomToken(t), gatewayToken: gw.hooksToken, sites: []edgeSite{
		{ln: listenLoopback(t), gateway: gw.addr(), extra: features},
		{ln: listenLoopback(t), gateway: tap.addr(), extra: features},
		{ln: listenLoopback(t), gateway: spoolTap.addr(), extra: []string{spool}},
	}}
	edge := startEdge(t, bin, cfg)
	viaDirect, viaTap, viaSpool := edge.client(0, ""), edge.client(1, ""), edge.client(2, "")

	t.Run("wake passes the gateway reply through", func(t *testing.T) {
		mark := tap.count()
		r := viaTap.post(t, "/wake", map[string]any{"text": "e2e edge wake " + tag})
		wantStatus(t, "wake", r, http.StatusOK)
		seen := tap.since(mark)
		if len(seen) != 1 || seen[0].path != "/hooks/wake" || seen[0].status != 200 {
			t.Fatalf("gateway saw %+v, want one /hooks/wake answered 200", seen)
		}
		if r.json["ok"] != true || r.str("eventOutcome") != seen[0].eventOutcome || r.str("eventOutcome") != "queued" {
			t.Fatalf("reply %s, want the gateway's ok + eventOutcome %q", r.body, seen[0].eventOutcome)
		}
		if seen[0].forwarded {
			t.Fatal("caddyhook sent a client-address header; the gateway answers 403 to those from an untrusted peer")
		}
		if seen[0].idempotencyKey == "" {
			t.Fatal("caddyhook dispatched without an Idempotency-Key")
		}
	})

	t.Run("agent accepted with the gateway's runId", func(t *testing.T) {
		mark := tap.count()
		r := viaTap.post(t, "/agent", map[string]any{
			"message": "e2e edge agent " + tag, "name": "E2E", "sessionKey": "hook:e2e:edge:" + tag, "model": "openai/gpt-4o",
		})
		wantStatus(t, "agent", r, http.StatusOK)
		seen := tap.since(mark)
		if len(seen) != 1 || seen[0].path != "/hooks/agent" || !uuidPattern.MatchString(seen[0].runID) {
			t.Fatalf("gateway saw %+v, want one /hooks/agent with a runId", seen)
		}
		if r.str("runId") != seen[0].runID {
			t.Fatalf("reply runId %q, want the gateway's %q", r.str("runId"), seen[0].runID)
		}
	})

	t.Run("idempotent replay returns the same runId", func(t *testing.T) {
		mark := tap.count()
		body := map[string]any{"message": "e2e edge replay " + tag, "sessionKey": "hook:e2e:replay:" + tag}
		first := viaTap.post(t, "/agent", body, "Idempotency-Key", "e2e-edge-"+tag)
		wantStatus(t, "agent", first, http.StatusOK)
		again := viaTap.post(t, "/agent", body, "Idempotency-Key", "e2e-edge-"+tag)
		wantStatus(t, "replay", again, http.StatusOK)
		if !uuidPattern.MatchString(first.str("runId")) || again.str("runId") != first.str("runId") {
			t.Fatalf("replay runId %q, first %q: want the same run", again.str("runId"), first.str("runId"))
		}
		// Either the edge answered the replay itself, or it resent the
		// same Idempotency-Key and the gateway deduplicated.
		for _, rec := range tap.since(mark) {
			if rec.idempotencyKey != tap.since(mark)[0].idempotencyKey {
				t.Fatalf("replay reached the gateway with a different Idempotency-Key: %+v", tap.since(mark))
			}
		}
	})

	t.Run("mapped gmail fan-out", func(t *testing.T) {
		mark := tap.count()
		r := viaTap.post(t, "/gmail", gmailPush("edge-"+tag, 3))
		wantStatus(t, "gmail", r, http.StatusOK)
		ids := r.strs("runIds")
		if len(ids) != 3 || r.num("dispatched") != 3 || r.str("runId") != ids[0] || !distinct(ids) {
			t.Fatalf("gmail reply %s, want runId = runIds[0], 3 distinct runIds, dispatched 3", r.body)
		}
		var gatewayIDs []string
		for _, rec := range tap.since(mark) {
			if rec.path != "/hooks/agent" || rec.status != 200 {
				t.Fatalf("gateway saw %+v, want only accepted /hooks/agent", rec)
			}
			gatewayIDs = append(gatewayIDs, rec.runID)
		}
		slices.Sort(gatewayIDs)
		sorted := slices.Sorted(slices.Values(ids))
		if !slices.Equal(gatewayIDs, sorted) {
			t.Fatalf("reply runIds %v, gateway handed out %v", sorted, gatewayIDs)
		}
	})

	t.Run("gateway refusal becomes 400 with its reason", func(t *testing.T) {
		// caddyhook's channel list is wider than this gateway's, which
		// has no channel plugins: the gateway refuses, the edge says why.
		mark := tap.count()
		r := viaTap.post(t, "/agent", map[string]any{"message": "x " + tag, "channel": "telegram", "to": "123"})
		wantError(t, "telegram", r, http.StatusBadRequest, "gateway: channel must be last")
		if seen := tap.since(mark); len(seen) != 1 || seen[0].status != 400 {
			t.Fatalf("gateway saw %+v, want one request answered 400", seen)
		}
	})

	t.Run("policy rejections never reach the gateway", func(t *testing.T) {
		mark := tap.count()
		big := append(append([]byte(`{"text":"`), bytes.Repeat([]byte("a"), 300<<10)...), `"}`...)
		cases := []struct {
			name    string
			req     request
			token   *string // nil keeps the edge token
			status  int
			jsonErr string // exact reason when the reference defines it
		}{
			{name: "query token", req: request{sub: "/wake?token=x", body: map[string]any{"text": "x"}}, status: 400},
			{name: "no token", req: request{sub: "/wake", body: map[string]any{"text": "x"}}, token: ptr(""), status: 401},
			{name: "wrong token", req: request{sub: "/wake", body: map[string]any{"text": "x"}}, token: ptr("wrong"), status: 401},
			{name: "GET", req: request{sub: "/wake", method: http.MethodGet}, status: 405},
			{name: "not JSON content type", req: request{sub: "/wake", body: []byte(`{"text":"x"}`), contentType: "text/plain"}, status: 415},
			{name: "too large", req: request{sub: "/wake", body: big}, status: 413},
			{name: "invalid JSON", req: request{sub: "/wake", body: []byte(`{"text":`)}, status: 400},
			{name: "wake without text", req: request{sub: "/wake", body: map[string]any{"text": " "}}, status: 400, jsonErr: "text required"},
			{name: "agent without message", req: request{sub: "/agent", body: map[string]any{}}, status: 400, jsonErr: "message required"},
			{name: "unknown channel", req: request{sub: "/agent", body: map[string]any{"message": "x", "channel": "bogus"}}, status: 400},
			{name: "empty model", req: request{sub: "/agent", body: map[string]any{"message": "x", "model": ""}}, status: 400, jsonErr: "model required"},
			{name: "model not allowed", req: request{sub: "/agent", body: map[string]any{"message": "x", "model": "other/model"}}, status: 400},
			{name: "session key prefix", req: request{sub: "/agent", body: map[string]any{"message": "x", "sessionKey": "other:1"}}, status: 400, jsonErr: "sessionKey must start with one of: hook:"},
			{name: "agent not allowed", req: request{sub: "/agent", body: map[string]any{"message": "x", "agentId": "ops"}}, status: 400, jsonErr: "agentId is not allowed by allowed_agent_ids"},
			{name: "unknown hook", req: request{sub: "/nothing", body: map[string]any{}}, status: 404},
			{name: "no hook name", req: request{sub: "/", body: map[string]any{}}, status: 404},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := viaTap
				if tc.token != nil {
					c = viaTap.withToken(*tc.token)
				}
				r := c.do(t, tc.req)
				if tc.status == 400 || tc.status == 413 || tc.status == 415 {
					wantError(t, tc.name, r, tc.status, tc.jsonErr)
					return
				}
				wantStatus(t, tc.name, r, tc.status)
			})
		}
		if seen := tap.since(mark); len(seen) != 0 {
			t.Fatalf("the gateway saw %d rejected requests: %+v", len(seen), seen)
		}
	})

	t.Run("lockout is answered at the edge", func(t *testing.T) {
		mark := tap.count()
		bad := edge.client(1, "127.0.0.2").withToken("wrong-token")
		for i := 1; i <= 20; i++ {
			wantStatus(t, "failure "+strconv.Itoa(i), bad.post(t, "/wake", map[string]any{"text": "x"}), http.StatusUnauthorized)
		}
		r := bad.post(t, "/wake", map[string]any{"text": "x"})
		wantStatus(t, "21st failure", r, http.StatusTooManyRequests)
		if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q, want whole seconds ≥ 1", r.header.Get("Retry-After"))
		}
		// Stricter than the gateway: a locked address gets no guess
		// evaluated, not even the right one.
		good := bad.withToken(cfg.edgeToken)
		wantStatus(t, "right token from the locked address", good.post(t, "/wake", map[string]any{"text": "x"}), http.StatusTooManyRequests)
		if seen := tap.since(mark); len(seen) != 0 {
			t.Fatalf("the gateway saw %d requests during the lockout", len(seen))
		}
		// Per address: 127.0.0.1 is unaffected.
		wantStatus(t, "another address", viaTap.post(t, "/wake", map[string]any{"text": "other address " + tag}), http.StatusOK)
	})

	t.Run("direct loopback TCP", func(t *testing.T) {
		r := viaDirect.post(t, "/wake", map[string]any{"text": "e2e direct edge wake " + tag})
		wantStatus(t, "wake", r, http.StatusOK)
		if r.str("eventOutcome") != "queued" {
			t.Fatalf("wake reply %s, want the gateway's eventOutcome", r.body)
		}
		r = viaDirect.post(t, "/agent", map[string]any{"message": "e2e direct edge agent " + tag})
		wantStatus(t, "agent", r, http.StatusOK)
		if !uuidPattern.MatchString(r.str("runId")) {
			t.Fatalf("agent reply %s, want a runId", r.body)
		}
	})

	t.Run("gateway outage and restart", func(t *testing.T) {
		spoolMark := spoolTap.count()
		gw.Stop()

		r := viaDirect.post(t, "/wake", map[string]any{"text": "during outage " + tag})
		wantError(t, "wake while the gateway is down", r, http.StatusBadGateway, "")
		// a 502, not the 504 of gateway_timeout (10s): the edge did not
		// wait; the bound only catches a hang
		if r.took > 8*time.Second {
			t.Fatalf("502 took %v, want it without waiting for the gateway timeout", r.took)
		}
		t.Logf("stopped gateway: 502 in %v", r.took.Round(time.Microsecond))

		for _, req := range []struct{ sub, field string }{{"/wake", "text"}, {"/agent", "message"}} {
			r := viaSpool.post(t, req.sub, map[string]any{req.field: "spooled during outage " + tag})
			if r.status/100 != 2 {
				t.Fatalf("spool %s while the gateway is down: status %d %s, want 2xx", req.sub, r.status, r.body)
			}
		}

		gw.Start(t)
		r = viaDirect.post(t, "/wake", map[string]any{"text": "after restart " + tag})
		wantStatus(t, "wake after restart", r, http.StatusOK)
		r = viaDirect.post(t, "/agent", map[string]any{"message": "after restart " + tag})
		wantStatus(t, "agent after restart", r, http.StatusOK)

		delivered := func() bool {
			seen := map[string]bool{}
			for _, rec := range spoolTap.since(spoolMark) {
				if rec.status == 200 {
					seen[rec.path] = true
				}
			}
			return seen["/hooks/wake"] && seen["/hooks/agent"]
		}
		if !testkit.Eventually(60*time.Second, delivered) {
			t.Fatalf("spooled events not delivered 60 s after the restart; gateway saw %+v", spoolTap.since(spoolMark))
		}
		t.Logf("spooled events delivered after restart (%d attempts seen)", len(spoolTap.since(spoolMark)))
	})
}

// distinct reports whether no string repeats.
func distinct(ss []string) bool {
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
