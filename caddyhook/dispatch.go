package caddyhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// eventNamespace derives deterministic event ids from idempotency keys, so
// a replay (even after a restart) reaches the gateway with the same
// Idempotency-Key.
var eventNamespace = uuid.MustParse("6f1b1c39-5b0e-4c1a-9d55-2f3f0e1c6a7b")

// prepared is a request ready for the gateway: a rendered action or a
// forwarded request, its event id (the reply's runId in spool mode) and,
// for a wake, its mode.
type prepared struct {
	gatewayRequest
	mode    string
	eventID string
	// forward: the gateway's answer is the sender's (forwardOutcome).
	forward bool
}

// prepare applies the content boundary (applyBoundary; the external-content
// wrapper only when the edge wraps), encodes the gateway body and assigns
// the event id, which is also the Idempotency-Key: eventID when the
// request was idempotent, else a random one.
func (h *Handler) prepare(a *Action, eventID string) prepared {
	if eventID == "" {
		eventID = uuid.NewString()
	}
	if a.Kind == KindAgent && !a.AllowUnsafe && !h.wrapEdge {
		u := *a
		u.AllowUnsafe = true // wrap gateway: the gateway wraps every external message itself
		a = &u
	}
	a = applyBoundary(a)
	g := gatewayRequest{kind: a.Kind, body: a.appendGatewayBody(make([]byte, 0, 256+len(a.Message))), idemKey: eventID}
	if a.Wait {
		g.timeout = h.gateway.waitTimeoutFor(a.TimeoutSeconds)
	}
	return prepared{gatewayRequest: g, mode: a.Mode, eventID: eventID}
}

// applyBoundary returns a as the gateway must see it: an agent message
// wrapped (unless the mapping allows unsafe content) and its name
// sanitised; a wake text that a mapping built from the payload with its
// markers and control tokens neutralised (a wake has no wrapper: it
// becomes a system event). Direct /wake text comes from the token holder
// and passes unchanged, as it does through the gateway.
func applyBoundary(a *Action) *Action {
	w := *a
	switch {
	case a.Kind == KindAgent:
		w.Name = boundary.SanitizeName(a.Name)
		if !a.AllowUnsafe {
			w.Message = boundary.Wrap(a.Message, a.Source)
		}
	case a.Kind == KindWake && a.Source != "" && !a.AllowUnsafe:
		w.Text = boundary.Sanitize(a.Text)
	default:
		return a
	}
	return &w
}

// actionSeeds derives one event id per action of an idempotent request
// from the key, the action's position and its content as requested. A
// replay, even after a restart, reaches the gateway with the same
// Idempotency-Keys; the ids also identify the request in the cache.
func actionSeeds(key string, acts []Action) []string {
	ids := make([]string, len(acts))
	var buf []byte
	for i := range acts {
		buf = append(buf[:0], key...)
		buf = append(buf, 0, byte(acts[i].Kind))
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = acts[i].appendGatewayBody(append(buf, 0))
		ids[i] = uuid.NewSHA1(eventNamespace, buf).String()
	}
	return ids
}

// fanoutParallelism bounds concurrent dispatches of one fan-out.
const fanoutParallelism = 8

// syncSink dispatches to the gateway while the caller waits.
type syncSink struct{ h *Handler }

// deliver dispatches items to the gateway now and composes the reply: a
// single action passes the gateway's JSON through; a fan-out answers with
// every runId.
func (s syncSink) deliver(ctx context.Context, items []prepared, dropped int, ip netip.Addr) (int, []byte, *hookError) {
	h := s.h
	clientIP := ""
	if h.gateway.forwardIP {
		clientIP = ip.String()
	}
	if len(items) == 1 {
		rep, herr := h.sendOne(ctx, &items[0], clientIP)
		if herr != nil {
			return 0, nil, herr
		}
		return rep.status, rep.body, nil
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
			replies[i], errs[i] = h.sendOne(ctx, &items[i], clientIP)
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

// sendOne dispatches one item and maps the outcome.
func (h *Handler) sendOne(ctx context.Context, it *prepared, clientIP string) (gatewayReply, *hookError) {
	start := time.Now()
	rep, err := h.gateway.send(ctx, &it.gatewayRequest, clientIP)
	h.gatewayFailure(it.kind, it.eventID, rep.status, err)
	herr := rep.outcome(err)
	if it.forward {
		herr = rep.forwardOutcome(err)
	}
	if herr == nil && !json.Valid(rep.body) && !(it.forward && rep.status == http.StatusNoContent) {
		herr = reject(http.StatusBadGateway, "gateway returned an invalid reply")
	}
	outcome := "ok"
	if herr != nil {
		outcome = strconv.Itoa(herr.status)
	}
	h.metrics.observeDispatch(it.kind, outcome, time.Since(start))
	return rep, herr
}

// composeReply builds the reply for several actions (or for spooled ones):
// {"ok":true,"runId":<first>,"runIds":[…],"dispatched":N[,"dropped":M]}
// for agent actions; for wakes the gateway's shape,
// {"ok":true,"mode":…[,"eventOutcome":…]}, where eventOutcome is the first
// "queued" outcome of the gateway's replies, else the first one.
func composeReply(items []prepared, runIDs []string, eventOutcome string, dropped int) []byte {
	b := make([]byte, 0, 64+len(runIDs)*40)
	b = append(b, `{"ok":true`...)
	if len(items) > 0 && items[0].kind == KindWake {
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
