package caddyhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/safetext"
	"github.com/caddyhook/caddyhook/internal/version"
)

// EventsConfig configures the handler's event log (on by default, bodies
// off): the requests it answered, for the admin API, `caddy hooks tail`
// and the console. Accepted events are kept one by one with their
// dispatch outcome; rejections are counted per client address, status and
// reason per minute. A token or signature value is never recorded;
// header values only for the names of an allow-list.
type EventsConfig struct {
	// Disabled turns the event log off (Caddyfile `events off`).
	Disabled bool `json:"disabled,omitempty"`
	// Bodies keeps each accepted event's request body (up to MaxBody)
	// and what the gateway was sent, which replay needs.
	Bodies bool `json:"bodies,omitempty"`
	// MaxBody bounds the body kept per event (default 64 KiB).
	MaxBody int64 `json:"max_body,omitempty"`
	// MaxEvents bounds the accepted events kept (default 10,000).
	MaxEvents int `json:"max_events,omitempty"`
	// MaxBytes bounds the memory (and file) the events take, bodies
	// included (default 16 MiB).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Retain drops events older than this (default 24h).
	Retain caddy.Duration `json:"retain,omitempty"`
	// MaxRejections bounds the aggregated rejection rows (default 10,000).
	MaxRejections int `json:"max_rejections,omitempty"`
	// Dir keeps the events in Dir/events.db as well, so that they
	// survive a restart.
	Dir string `json:"dir,omitempty"`
	// Headers are further request headers whose values are recorded
	// (names of every header are); token and signature headers are refused.
	Headers []string `json:"headers,omitempty"`
}

// defaultEventHeaders are the headers whose values an event shows: none
// carries a credential.
var defaultEventHeaders = []string{
	"Content-Type", "Content-Length", "Content-Encoding", "User-Agent", "Idempotency-Key", "Traceparent",
	"X-Request-Id", "X-Github-Event", "X-Github-Delivery", "X-Github-Hook-Id", "X-Gitlab-Event",
	"Webhook-Id", "Webhook-Timestamp", "Svix-Id", "Svix-Timestamp", "Stripe-Account",
	"X-Slack-Request-Timestamp", "X-Slack-Retry-Num", "X-Slack-Retry-Reason", "X-Goog-Channel-Id",
}

// credentialHeaders may never be added to the allow-list.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", headerServiceToken, "X-Openclaw-Token"}

// maxHeaderValue bounds an allow-listed header value kept.
const maxHeaderValue = 256

// eventRecorder is what a handler records with: its log, its share of it
// and its own settings (bodies, the header allow-list).
type eventRecorder struct {
	log     *eventlog.Log
	reg     *eventlog.Registration
	bodies  bool
	maxBody int
	allow   map[string]bool
	node    string // this node's name, for cluster deliveries
	spooled bool   // a 200 means queued, not sent
	// stopOutcomes ends the subscription to the other nodes' outcomes
	// (cluster engines that carry them; see outcome.go).
	stopOutcomes func()
}

// bounds converts the config to the log's bounds.
func (c *EventsConfig) bounds() eventlog.Bounds {
	return eventlog.Bounds{MaxEvents: c.MaxEvents, MaxBytes: c.MaxBytes, Retain: time.Duration(c.Retain), MaxRejections: c.MaxRejections}
}

// provisionEvents opens (or shares, across a reload) the handler's event
// log. The log belongs to the server's listeners, the base path and the
// directory, so a reload that keeps them keeps the events; the bounds of
// the oldest config using it apply (a refused reload changes nothing).
func (h *Handler) provisionEvents(ctx caddy.Context) error {
	ec := h.Events
	if ec == nil {
		ec = &EventsConfig{}
	}
	if ec.Disabled {
		return nil
	}
	b := ec.bounds()
	if err := b.Validate(); err != nil {
		return err
	}
	rec := &eventRecorder{bodies: ec.Bodies, maxBody: eventlog.DefaultMaxBody, allow: map[string]bool{}}
	if ec.MaxBody != 0 {
		if ec.MaxBody < 0 || ec.MaxBody > eventlog.MaxMaxBody {
			return fmt.Errorf("events: max_body %d must be between 1 and %d", ec.MaxBody, eventlog.MaxMaxBody)
		}
		rec.maxBody = int(ec.MaxBody)
	}
	if mb := b.MaxBytes; mb == 0 && int64(rec.maxBody) > eventlog.DefaultMaxBytes/4 || mb > 0 && int64(rec.maxBody) > mb/4 {
		return fmt.Errorf("events: max_body %d must be at most a quarter of max_bytes", rec.maxBody)
	}
	for _, n := range defaultEventHeaders {
		rec.allow[n] = true
	}
	secret := slices.Concat(credentialHeaders, h.tokenHeaders, h.signatureHeaders())
	for _, n := range ec.Headers {
		c := http.CanonicalHeaderKey(strings.TrimSpace(n))
		if c == "" || strings.ContainsAny(c, " \t:\r\n") {
			return fmt.Errorf("events: headers: %q is not a header name", n)
		}
		if slices.ContainsFunc(secret, func(s string) bool { return strings.EqualFold(s, c) }) {
			return fmt.Errorf("events: headers: %s carries a credential or a signature; its value is never recorded", c)
		}
		rec.allow[c] = true
	}
	var dir string
	if ec.Dir != "" {
		d, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(ec.Dir, ""))
		if err != nil {
			return fmt.Errorf("events: dir: %w", err)
		}
		dir = d
	}
	var listen []string
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		listen = slices.Sorted(slices.Values(srv.Listen))
	}
	key := fmt.Sprintf(eventsPoolPrefix+"%q|%q|%q", strings.Join(listen, ","), h.base, dir)
	logger := h.logger.Named("events")
	l, _, err := hold(&h.held, key, func() (*eventlog.Log, error) {
		l, err := eventlog.New(b, eventlog.Options{Dir: dir, OnError: func(err error) { logger.Error("event log", zap.Error(err)) }})
		if err == nil {
			for v, n := range l.Newer() {
				logger.Warn("event log: keeping events written by a newer release, unread: they stay in events.db for that release",
					zap.String("dir", dir), zap.Int("version", v), zap.Int("events", n))
				h.metrics.unreadable.Add(version.StoreEventLog, v, n)
			}
		}
		return l, err
	})
	if err != nil {
		return err
	}
	rec.log = l
	rec.reg = rec.log.Register(b)
	rec.node = h.nodeName()
	rec.spooled = h.Spool != nil
	h.evrec = rec
	return h.subscribeOutcomes()
}

// releaseEvents ends the outcome subscription and gives back the
// handler's registration (its bounds).
func (h *Handler) releaseEvents() {
	if h.evrec == nil {
		return
	}
	if h.evrec.stopOutcomes != nil {
		h.evrec.stopOutcomes()
		h.evrec.stopOutcomes = nil
	}
	if h.evrec.reg != nil {
		h.evrec.reg.Release()
		h.evrec.reg = nil
	}
}

// recordEvent is the one call where the handler answers: an accepted
// event (it reached dispatch, or was answered without one) is kept with
// its outcome; a refusal is counted in its address's row.
func (h *Handler) recordEvent(ex *exchange, status int, body []byte, herr *hookError) {
	rec := h.evrec
	if rec == nil {
		return
	}
	key := h.lockout.KeyOf(ex.ip)
	client, bits := h.displayAddr(key)
	if ex.items == nil && herr != nil {
		hook := ex.sub
		if herr.reason == reasonQueryToken {
			hook = "" // it may hold the token
		}
		rec.log.Reject(eventlog.Refusal{Time: ex.now, Client: client, Bits: bits, Key: key, Status: status,
			Reason: herr.reason, Hook: hook, Locked: herr.reason == reasonLockedOut})
		return
	}
	now := time.Now()
	box := new(eventBox) // the event and its first action in one allocation
	e := &box.e
	*e = eventlog.Event{Time: ex.now, Path: h.base, Hook: ex.sub, Route: ex.route, Mapping: ex.mapping,
		Client: client, ClientBits: bits, Auth: authOf(ex), Status: status, IdemKey: h.idempotencyKey(ex),
		Tracked: rec.spooled && ex.items != nil, Latency: now.Sub(ex.now)}
	if herr != nil {
		e.Reason = herr.reason
	}
	e.Headers = rec.headers(ex.r.Header)
	e.Dispatch = rec.outcomes(box.d[:0], ex.items, status, body, herr, ex.route == "challenge", now)
	e.ID = e.Dispatch[0].ID
	if rec.bodies {
		var token string
		if ex.tokenOK {
			token = presentedToken(ex.r.Header, h.tokenHeaders)
		}
		rec.keepBody(e, ex.body, token)
		rec.keepReplay(e, ex.items, ex.ip, token)
	}
	rec.log.Accept(e)
}

// eventBox allocates an event with room for one action.
type eventBox struct {
	e eventlog.Event
	d [1]eventlog.Dispatch
}

// displayAddr is a lockout key as an address (and its IPv6 grouping).
func (h *Handler) displayAddr(key lockout.Key) (netip.Addr, int) {
	ip := netip.AddrFrom16(key).Unmap()
	if ip.Is6() && h.IPv6Prefix < 128 {
		return ip, h.IPv6Prefix
	}
	return ip, 0
}

// authOf says how the request authenticated.
func authOf(ex *exchange) string {
	switch {
	case ex.tokenOK:
		return "token"
	case len(ex.verified) > 0:
		return "signature " + ex.verified[0].Scheme()
	}
	return "none"
}

// headers lists the request's header names, with the values of the
// allow-listed ones (cut at maxHeaderValue).
func (rec *eventRecorder) headers(hd http.Header) []eventlog.Header {
	out := make([]eventlog.Header, 0, len(hd))
	for name, vs := range hd {
		h := eventlog.Header{Name: name}
		if rec.allow[name] && len(vs) > 0 {
			v := vs[0]
			if len(v) > maxHeaderValue {
				v = v[:maxHeaderValue]
			}
			h.Value, h.Shown = v, true
		}
		out = append(out, h)
	}
	return out
}

// outcomes appends to dst the dispatch state of each item right after
// the answer (at now): sent or failed (sync), queued or failed (spool),
// or for a request that dispatched nothing, what it was answered with
// (duplicate, skipped, challenge). It always returns at least one entry,
// whose id is the event's.
func (rec *eventRecorder) outcomes(dst []eventlog.Dispatch, items []prepared, status int, body []byte, herr *hookError, challenge bool, now time.Time) []eventlog.Dispatch {
	if len(items) == 0 {
		d := eventlog.Dispatch{ID: uuid.NewString(), State: eventlog.StateDuplicate, Updated: now}
		switch {
		case challenge:
			d.State = eventlog.StateChallenge
		case status == http.StatusNoContent:
			d.State = eventlog.StateSkipped
		default:
			d.RunID = runID(body)
		}
		return append(dst, d)
	}
	ds := slices.Grow(dst, len(items))[:len(items)]
	var ids []string
	if herr == nil && !rec.spooled && len(items) > 1 {
		ids = runIDs(body, len(items))
	}
	for i := range items {
		d := eventlog.Dispatch{ID: items[i].eventID, Kind: items[i].kind.String(), Updated: now}
		switch {
		case herr != nil:
			d.State, d.Error = eventlog.StateFailed, herr.reason
		case rec.spooled:
			d.State = eventlog.StateQueued
		case ids != nil:
			d.State, d.GatewayStatus, d.RunID, d.Attempts = eventlog.StateSent, status, ids[i], 1
		default:
			d.State, d.GatewayStatus, d.RunID, d.Attempts = eventlog.StateSent, status, runID(body), 1
		}
		ds[i] = d
	}
	return ds
}

// runIDs reads the n run ids of a fan-out reply ("" where missing).
func runIDs(body []byte, n int) []string {
	out := make([]string, n)
	var r struct {
		RunIDs []string `json:"runIds"`
	}
	if bytes.Contains(body, []byte(`"runIds"`)) && json.Unmarshal(body, &r) == nil {
		copy(out, r.RunIDs)
	}
	return out
}

// runID reads the runId of a reply ("" when it has none: a wake).
func runID(body []byte) string {
	if !bytes.Contains(body, []byte(`"runId"`)) {
		return ""
	}
	var r struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(body, &r)
	return r.RunID
}

// redacted replaces the hook token in kept text.
const redacted = "[REDACTED]"

// keepBody keeps the request body, cut at max_body, with the presented
// hook token (if the sender put it there too) replaced.
func (rec *eventRecorder) keepBody(e *eventlog.Event, body []byte, token string) {
	e.BodyBytes = len(body)
	kept := body[:min(len(body), rec.maxBody)]
	if len(kept) < len(body) {
		e.BodyNote = fmt.Sprintf("cut at max_body (%d of %d bytes)", len(kept), len(body))
	}
	if token != "" && bytes.Contains(body, []byte(token)) {
		e.Body = bytes.ReplaceAll(kept, []byte(token), []byte(redacted))
		e.BodyNote = "the hook token was replaced"
		return
	}
	e.Body = append(make([]byte, 0, len(kept)), kept...)
}

// replayItem is one gateway request of an event, as kept for a replay:
// what the gateway was sent, minus what the edge adds on every send (its
// credentials, the forwarded address, the trace context, the
// Idempotency-Key).
type replayItem struct {
	Kind     string      `json:"kind"`
	Mode     string      `json:"mode,omitempty"`
	Path     string      `json:"path,omitempty"`
	Header   http.Header `json:"header,omitempty"`
	Body     []byte      `json:"body"`
	Forward  bool        `json:"forward,omitempty"`
	ClientIP string      `json:"client_ip,omitempty"`
}

// edgeHeaders are the headers a gateway request gets from the edge at
// send time; a replay sends its own.
var edgeHeaders = []string{"Authorization", "X-Forwarded-For", "Traceparent", "Tracestate", "Idempotency-Key"}

// keepReplay keeps what replaying the event needs, unless it is larger
// than max_body or carries the hook token.
func (rec *eventRecorder) keepReplay(e *eventlog.Event, items []prepared, ip netip.Addr, token string) {
	if len(items) == 0 {
		e.ReplayNote = "nothing was dispatched"
		return
	}
	out := make([]replayItem, len(items))
	size := 0
	for i := range items {
		it := &items[i]
		out[i] = replayItem{Kind: it.kind.String(), Mode: it.mode, Path: it.path, Body: it.body, Forward: it.forward}
		if ip.IsValid() {
			out[i].ClientIP = ip.String()
		}
		if it.header != nil {
			out[i].Header = it.header.Clone()
			for _, n := range edgeHeaders {
				delete(out[i].Header, n)
			}
		}
		if token != "" && (bytes.Contains(it.body, []byte(token)) || headerHolds(out[i].Header, token)) {
			e.ReplayNote = "not kept: it carries the hook token"
			return
		}
		size += len(it.body)
	}
	if size > rec.maxBody {
		e.ReplayNote = fmt.Sprintf("what the gateway was sent (%d bytes) is larger than max_body", size)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		e.ReplayNote = "not kept: " + err.Error()
		return
	}
	e.Replay = b
}

// headerHolds reports whether a header value contains s.
func headerHolds(h http.Header, s string) bool {
	for _, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

// recordDelivery is the callback for dispatch outcomes: a delivery
// attempt of the spooled event id (its attempts so far) got status, err
// and the gateway's reply body. It is noted in this node's event log
// and, in a cluster, published to the other nodes (see noteOutcomes).
func (h *Handler) recordDelivery(id string, attempts, status int, err error, reply []byte) {
	o := cluster.Outcome{ID: id, Attempts: attempts + 1, GatewayStatus: status}
	switch spool.Classify(status, err) {
	case spool.OutcomeDone:
		o.State, o.RunID = eventlog.StateDelivered, runID(reply)
	case spool.OutcomeDead:
		o.State, o.Error = eventlog.StateDead, deliveryError(status, err, reply)
	default:
		o.State, o.Error = eventlog.StateRetrying, deliveryError(status, err, reply)
	}
	h.noteOutcomes([]cluster.Outcome{o})
}

// recordExpired notes that the spooled event id went to the dead letters
// past max_age after attempts attempts.
func (h *Handler) recordExpired(id string, attempts int) {
	h.noteOutcomes([]cluster.Outcome{{ID: id, Attempts: attempts, State: eventlog.StateDead, Error: spool.ReasonExpired}})
}

// deliveryError is a failed attempt's reason, fit for the console.
func deliveryError(status int, err error, reply []byte) string {
	if err != nil {
		if err == errGatewayTimeout {
			return "gateway timeout"
		}
		return reasonGatewayDown
	}
	return safetext.Line(fmt.Sprintf("gateway status %d: %s", status, reply[:min(len(reply), 200)]))
}

// recordOperator notes an operator's action on dead letters (retried:
// queued again; dropped) in their events, here and, in a cluster, on the
// other nodes.
func (h *Handler) recordOperator(ids []string, state string) {
	for len(ids) > 0 {
		n := min(len(ids), cluster.MaxOutcomeItems)
		batch := make([]cluster.Outcome, n)
		for i, id := range ids[:n] {
			batch[i] = cluster.Outcome{ID: id, State: state}
		}
		h.noteOutcomes(batch)
		ids = ids[n:]
	}
}
