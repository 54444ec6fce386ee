package caddyhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// fanoutParallelism bounds concurrent dispatches of one fan-out.
const fanoutParallelism = 8

// sink is where prepared actions go: the gateway now (sync), the spool,
// or a dry run. It also composes the caller's reply.
type sink interface {
	deliver(ctx context.Context, items []prepared, dropped int, ip netip.Addr) (int, []byte, *hookError)
}

// dispatcher takes prepared requests to the gateway: the sending, its
// metric and its failure log, and, for a spooled event, the outcome of
// each delivery attempt (to the event logs).
type dispatcher struct {
	gateway  *gatewayClient
	metrics  *hookMetrics
	logs     *logBudget // the gateway failure lines (shared with the cluster warnings)
	logger   *zap.Logger
	outcomes *outcomeRelay
}

// syncSink dispatches to the gateway while the caller waits.
type syncSink struct{ d *dispatcher }

// deliver dispatches items to the gateway now and composes the reply: a
// single action passes the gateway's JSON through; a fan-out answers with
// every runId.
func (s syncSink) deliver(ctx context.Context, items []prepared, dropped int, ip netip.Addr) (int, []byte, *hookError) {
	d := s.d
	clientIP := ""
	if d.gateway.forwardsClientIP() {
		clientIP = ip.String()
	}
	if len(items) == 1 {
		d := d.send(ctx, &items[0], clientIP, false)
		if d.herr != nil {
			return 0, nil, d.herr
		}
		return d.reply.status, d.reply.body, nil
	}
	replies := make([]gatewayReply, len(items))
	errs := make([]*hookError, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, fanoutParallelism)
	for i := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sent := d.send(ctx, &items[i], clientIP, false)
			replies[i], errs[i] = sent.reply, sent.herr
		}()
	}
	wg.Wait()
	runIDs := make([]string, 0, len(items))
	outcome := ""
	for i := range items {
		if errs[i] != nil {
			return 0, nil, errs[i]
		}
		var r struct {
			RunID        string `json:"runId"`
			EventOutcome string `json:"eventOutcome"`
		}
		_ = json.Unmarshal(replies[i].body, &r)
		runIDs = append(runIDs, r.RunID)
		if outcome == "" || r.EventOutcome == "queued" && outcome != "queued" {
			outcome = r.EventOutcome
		}
	}
	return http.StatusOK, composeReply(items, runIDs, outcome, dropped), nil
}

// composeReply builds the reply for several actions (or for spooled ones):
// {"ok":true,"runId":<first>,"runIds":[…],"dispatched":N[,"dropped":M]}
// for agent actions; for wakes the gateway's shape,
// {"ok":true,"mode":…[,"eventOutcome":…]}, where eventOutcome is the first
// "queued" outcome of the gateway's replies, else the first one.
func composeReply(items []prepared, runIDs []string, eventOutcome string, dropped int) []byte {
	b := make([]byte, 0, 64+len(runIDs)*40)
	b = append(b, `{"ok":true`...)
	if len(items) > 0 && items[0].kind == kindWake {
		b = append(b, `,"mode":`...)
		b = appendJSONString(b, items[0].mode)
		if eventOutcome != "" {
			b = append(b, `,"eventOutcome":`...)
			b = appendJSONString(b, eventOutcome)
		}
		return append(b, '}')
	}
	if len(runIDs) > 0 {
		b = append(b, `,"runId":`...)
		b = appendJSONString(b, runIDs[0])
		if len(items) > 1 || dropped > 0 {
			b = append(b, `,"runIds":[`...)
			for i, id := range runIDs {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, id)
			}
			b = append(b, ']')
		}
	}
	if len(items) > 1 || dropped > 0 {
		b = append(b, `,"dispatched":`...)
		b = strconv.AppendInt(b, int64(len(items)), 10)
	}
	if dropped > 0 {
		b = append(b, `,"dropped":`...)
		b = strconv.AppendInt(b, int64(dropped), 10)
	}
	return append(b, '}')
}

// sent is one request's trip to the gateway: the reply (err nil) or the
// transport error, and the sender's answer it makes (herr nil: the
// gateway's reply passes as it is).
type sent struct {
	reply gatewayReply
	err   error
	herr  *hookError
}

// send takes it to the gateway: the reply or the transport error, a log
// line for a dispatch the gateway did not take, the dispatch metric by
// outcome, and the sender's answer. A spooled item is the spool's
// delivery: once ctx is over (the spool closing) nothing is logged, and
// any 2xx is delivered; a synchronous one wants a JSON reply (or a
// forwarded 204).
func (d *dispatcher) send(ctx context.Context, it *prepared, clientIP string, spooled bool) sent {
	start := time.Now()
	rep, err := d.gateway.send(ctx, &it.gatewayRequest, clientIP)
	if !spooled || ctx.Err() == nil {
		d.gatewayFailure(it.kind, it.eventID, rep.status, err)
	}
	herr := answer(rep, err, it.forward)
	if herr == nil && !spooled && !json.Valid(rep.body) && !(it.forward && rep.status == http.StatusNoContent) {
		herr = reject(http.StatusBadGateway, "gateway returned an invalid reply")
	}
	outcome := "ok"
	if herr != nil {
		outcome = statusLabel(herr.status)
	}
	d.metrics.observeDispatch(it.kind, outcome, time.Since(start))
	return sent{reply: rep, err: err, herr: herr}
}

// gatewayFailure logs a dispatch the gateway did not take: no connection,
// a timeout, a 5xx (an answer the sender sees as 502/504, or a spooled
// event retried), or a refusal of caddyhook itself (401, 403, 407, 429:
// a wrong gateway_token, untrusted forwarded headers), with a hint for
// the operator that the sender's 502 leaves out. It names the gateway address and the error, never
// a token or payload, at most rejectLogsPerSecond lines a second.
func (d *dispatcher) gatewayFailure(kind actionKind, eventID string, status int, err error) {
	if err == nil && status < 500 && !refusesEdge(status) {
		return
	}
	ok, suppressed := d.logs.allow(time.Now())
	if !ok {
		return
	}
	fields := []zap.Field{zap.String("gateway", d.gateway.address()), zap.String("kind", kind.String()),
		zap.String("event_id", eventID)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	} else {
		fields = append(fields, zap.Int("status", status))
	}
	if err == nil && refusesEdge(status) {
		// the sender got a bare 502 "gateway unavailable": the why is here
		fields = append(fields, zap.String("hint", "the gateway refused caddyhook itself: check gateway_token (the gateway's hooks token), "+
			"that the gateway does not see forwarded headers from the edge (gateway_forward_client_ip), and the gateway's own lockout"))
	}
	if suppressed > 0 {
		fields = append(fields, zap.Uint64("suppressed", suppressed))
	}
	d.logger.Warn("gateway dispatch failed", fields...)
}

// refusesEdge reports a gateway status that concerns the edge's own
// credentials or address, not the sender's request: a wrong
// gateway_token, forwarded headers the gateway does not trust, or the
// gateway's own lockout of the edge.
func refusesEdge(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired, http.StatusTooManyRequests:
		return true
	}
	return false
}

// answer is the sender's answer that a gateway reply r (or the transport
// error err) makes: nil when the reply passes as it is. A 2xx passes; a
// refusal of the edge itself (refusesEdge) is a 502; a 503 passes through
// with its Retry-After, and for a forwarded request (the gateway answers
// the sender) so does every other 4xx and 5xx; a rendered action's 4xx
// with {"ok":false,"error":…} is a 400 "gateway: …"; a timeout is a 504;
// anything else (unreachable, a redirect) a 502. No text names an option
// of the edge's configuration.
func answer(r gatewayReply, err error, forward bool) *hookError {
	switch {
	case errors.Is(err, errGatewayTimeout):
		return reject(http.StatusGatewayTimeout, reasonGatewayTimeout)
	case err != nil:
		return reject(http.StatusBadGateway, reasonGatewayDown)
	case r.status >= 200 && r.status < 300:
		return nil
	case refusesEdge(r.status):
		return reject(http.StatusBadGateway, reasonGatewayAuth)
	case r.status == http.StatusServiceUnavailable, forward && r.status >= 400 && r.status < 600:
		return r.passThrough()
	case !forward && r.status >= 400 && r.status < 500:
		var e struct {
			OK    *bool  `json:"ok"`
			Error string `json:"error"`
		}
		if json.Unmarshal(r.body, &e) == nil && e.OK != nil && !*e.OK {
			// the gateway's text goes to the public caller and the log
			if msg := safetext.Line(e.Error); msg != "" {
				return reject(http.StatusBadRequest, "gateway: "+msg)
			}
		}
	}
	return reject(http.StatusBadGateway, fmt.Sprintf("gateway error (status %d)", r.status))
}

// passThrough returns the gateway's own error answer as the sender's.
func (r gatewayReply) passThrough() *hookError {
	e := &hookError{status: r.status, reason: fmt.Sprintf("gateway answered %d", r.status)}
	if json.Valid(r.body) {
		e.body = r.body
	}
	if s, err := strconv.Atoi(strings.TrimSpace(r.retryAfter)); err == nil && s > 0 {
		e.retryAfter = time.Duration(s) * time.Second
	}
	return e
}

// gatewaySender delivers spooled events with the gateway client.
type gatewaySender struct{ d *dispatcher }

// Send implements spool.Sender.
func (s gatewaySender) Send(ctx context.Context, ev *spool.Event) (int, string, error) {
	it := s.d.eventItem(ev)
	ctx = withTrace(ctx, traceContext{parent: ev.TraceParent, state: ev.TraceState})
	d := s.d.send(ctx, &it, ev.ClientIP, true)
	if ctx.Err() == nil { // not the spool closing
		s.d.outcomes.delivery(ev.ID, ev.Attempts, d.reply.status, d.err, d.reply.body)
	}
	if d.err != nil {
		return 0, "", d.err
	}
	reason := ""
	if rep := d.reply; rep.status >= 300 {
		reason = string(rep.body[:min(len(rep.body), 200)])
	}
	return d.reply.status, reason, nil
}

// Expired implements spool.Expirer: the event log says the event is dead
// (here and, in a cluster, on the node that accepted it).
func (s gatewaySender) Expired(ev *spool.Event) {
	s.d.outcomes.expired(ev.ID, ev.Attempts, ev.LastError)
}

// Buried implements spool.Burier: the event log says the event is dead,
// and why (the gateway's answer, repeated).
func (s gatewaySender) Buried(ev *spool.Event, reason string) {
	s.d.outcomes.dead(ev.ID, ev.Attempts, safetext.Line(reason))
}

// eventItem is the gateway request of a spooled event: a rendered
// action goes to {prefix}/{kind} with its id as Idempotency-Key; a
// forwarded one to its stored path below d's gateway prefix (or, stored
// without it, to its stored path) with its stored headers.
func (d *dispatcher) eventItem(ev *spool.Event) prepared {
	kind := kindAgent
	if ev.Kind == spool.KindWake {
		kind = kindWake
	}
	g := gatewayRequest{kind: kind, body: ev.Body, idemKey: ev.ID}
	if ev.Header != nil {
		// a copy: send adds the edge's credential to the map, and a failed
		// attempt stores ev again
		g.path, g.header = ev.Path, ev.Header.Clone()
		if ev.PathBelowPrefix != "" {
			g.path = d.gateway.prefixed(ev.PathBelowPrefix)
		}
	}
	return prepared{gatewayRequest: g, eventID: ev.ID, forward: ev.Header != nil}
}
