package caddyhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// replayEvent dispatches the kept gateway requests of event id again,
// through the handler's own path (the gateway now, or the spool or the
// cluster queue when configured), each with a new idempotency key derived
// from the original event's, so that the gateway runs it again. The
// replay is an event of its own (replay_of names the original), which the
// answer names.
func (h *Handler) replayEvent(ctx context.Context, id string) (*replayAnswer, error) {
	rec := h.evrec
	orig, data, ok := rec.log.Get(id)
	switch {
	case !ok:
		return nil, apiError(http.StatusNotFound, "no event %q in the log of %s (it may have been evicted)", id, h.base)
	case data == nil:
		why := orig.ReplayNote
		if why == "" {
			why = "what the gateway was sent is kept only with events { bodies on }"
		}
		return nil, apiError(http.StatusConflict, "event %s cannot be replayed: %s", orig.ID, why)
	}
	var kept []replayItem
	if err := json.Unmarshal(data, &kept); err != nil || len(kept) == 0 {
		return nil, apiError(http.StatusConflict, "event %s cannot be replayed: its kept requests are unreadable", orig.ID)
	}
	now := time.Now()
	items := make([]prepared, len(kept))
	var ip netip.Addr
	for i, k := range kept {
		seed := orig.ID + "\x00replay\x00" + strconv.FormatInt(now.UnixNano(), 10) + "\x00" + strconv.Itoa(i)
		eid := uuid.NewSHA1(eventNamespace, []byte(seed)).String()
		kind := KindAgent
		if k.Kind == KindWake.String() {
			kind = KindWake
		}
		g := gatewayRequest{kind: kind, path: k.Path, body: k.Body, idemKey: eid}
		if k.Header != nil {
			g.header = k.Header.Clone()
			// a forwarded request is sent with its own headers only: the
			// new key, which the gateway reads before any other, makes it
			// run the replay again
			g.header["Idempotency-Key"] = []string{eid}
		}
		items[i] = prepared{gatewayRequest: g, mode: k.Mode, eventID: eid, forward: k.Forward}
		if i == 0 {
			ip, _ = netip.ParseAddr(k.ClientIP)
		}
	}
	status, body, herr := h.sink.deliver(ctx, items, 0, ip)
	if herr != nil {
		status = herr.status
	}
	e := &eventlog.Event{Time: now, Path: h.base, Hook: orig.Hook, Route: orig.Route, Mapping: orig.Mapping,
		Auth: "replay", Status: status, IdemKey: items[0].eventID, ReplayOf: orig.ID, Headers: orig.Headers,
		BodyBytes: orig.BodyBytes, BodyNote: orig.BodyNote, Replay: data, Tracked: rec.spooled}
	if orig.Body != nil {
		e.Body = []byte(*orig.Body)
	}
	if ip.IsValid() {
		e.Client, e.ClientBits = h.displayAddr(h.lockout.keyFor(ip))
	}
	if herr != nil {
		e.Reason = herr.reason
	}
	e.Latency = time.Since(now)
	e.Dispatch = h.evrec.outcomes(nil, items, status, body, herr, false, now.Add(e.Latency))
	e.ID = e.Dispatch[0].ID
	rec.log.Accept(e)
	h.logger.Info("event replayed through the admin API", zap.String("event", orig.ID), zap.String("replay", e.ID))
	ans := &replayAnswer{ID: e.ID, ReplayOf: orig.ID, Status: status, OK: herr == nil}
	if herr != nil {
		ans.Reason = herr.reason
	} else if json.Valid(body) {
		ans.Reply = body
	}
	return ans, nil
}
