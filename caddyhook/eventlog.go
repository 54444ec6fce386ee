package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
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

// eventRecorder keeps the requests the handler answered in its event
// log: its share of the log (shared across reloads by the handlers of the
// same listeners, base path and directory), its settings (bodies, the
// header allow-list), and what it reads of a request through the other
// concerns (the client's lockout key, the presented token to redact, the
// idempotency key). Replays (eventlog_admin.go) go through the handler's
// sink.
type eventRecorder struct {
	log     *eventlog.Log
	reg     *eventlog.Registration
	bodies  bool
	maxBody int
	allow   map[string]bool
	dir     string // as configured, for the admin API
	spooled bool   // a 200 means queued, not sent
	base    string
	logger  *zap.Logger

	lockout *lockoutGuard
	tokens  *tokenChecker
	idem    *idempotencyCheck
	policy  *policy // today's, which a replay goes through
}

// bounds converts the config to the log's bounds.
func (c *EventsConfig) bounds() eventlog.Bounds {
	return eventlog.Bounds{MaxEvents: c.MaxEvents, MaxBytes: c.MaxBytes, Retain: time.Duration(c.Retain), MaxRejections: c.MaxRejections}
}

// eventsSetup is what newEventRecorder needs of its handler.
type eventsSetup struct {
	listen     []string // the server's listener addresses
	base       string
	sigHeaders []string // the handler's signature headers (never recorded)
	spooled    bool
	held       *poolHold
	metrics    *hookMetrics // counts the events a newer release wrote
	logger     *zap.Logger
	lockout    *lockoutGuard
	tokens     *tokenChecker
	idem       *idempotencyCheck
	policy     *policy
}

// newEventRecorder opens (or shares, across a reload) the handler's event
// log; nil when ec turns it off. The log belongs to the server's
// listeners, the base path and the directory, so a reload that keeps them
// keeps the events; the bounds of the oldest config using it apply (a
// refused reload changes nothing).
func newEventRecorder(ec *EventsConfig, s eventsSetup) (*eventRecorder, error) {
	if ec == nil {
		ec = &EventsConfig{}
	}
	if ec.Disabled {
		return nil, nil
	}
	b := ec.bounds()
	if err := b.Validate(); err != nil {
		return nil, err
	}
	rec := &eventRecorder{bodies: ec.Bodies, maxBody: eventlog.DefaultMaxBody, allow: map[string]bool{}, dir: ec.Dir,
		spooled: s.spooled, base: s.base, logger: s.logger, lockout: s.lockout, tokens: s.tokens, idem: s.idem,
		policy: s.policy}
	if ec.MaxBody != 0 {
		if ec.MaxBody < 0 || ec.MaxBody > eventlog.MaxMaxBody {
			return nil, fmt.Errorf("events: max_body %d must be between 1 and %d", ec.MaxBody, eventlog.MaxMaxBody)
		}
		rec.maxBody = int(ec.MaxBody)
	}
	if mb := b.MaxBytes; mb == 0 && int64(rec.maxBody) > eventlog.DefaultMaxBytes/4 || mb > 0 && int64(rec.maxBody) > mb/4 {
		return nil, fmt.Errorf("events: max_body %d must be at most a quarter of max_bytes", rec.maxBody)
	}
	for _, n := range defaultEventHeaders {
		rec.allow[n] = true
	}
	secret := slices.Concat(credentialHeaders, s.tokens.headerNames(), s.sigHeaders)
	for _, n := range ec.Headers {
		c := http.CanonicalHeaderKey(strings.TrimSpace(n))
		if c == "" || strings.ContainsAny(c, " \t:\r\n") {
			return nil, fmt.Errorf("events: headers: %q is not a header name", n)
		}
		if slices.ContainsFunc(secret, func(s string) bool { return strings.EqualFold(s, c) }) {
			return nil, fmt.Errorf("events: headers: %s carries a credential or a signature; its value is never recorded", c)
		}
		rec.allow[c] = true
	}
	var dir string
	if ec.Dir != "" {
		d, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(ec.Dir, ""))
		if err != nil {
			return nil, fmt.Errorf("events: dir: %w", err)
		}
		dir = d
	}
	key := fmt.Sprintf(eventsPoolPrefix+"%q|%q|%q", strings.Join(s.listen, ","), s.base, dir)
	logger := s.logger.Named("events")
	l, _, err := hold(s.held, key, func() (*eventlog.Log, error) {
		l, err := eventlog.New(b, eventlog.Options{Dir: dir, OnError: func(err error) { logger.Error("event log", zap.Error(err)) }})
		if err == nil {
			for v, n := range l.Newer() {
				logger.Warn("event log: keeping events written by a newer release, unread: they stay in events.db for that release",
					zap.String("dir", dir), zap.Int("version", v), zap.Int("events", n))
				s.metrics.countUnreadable(version.StoreEventLog, v, n)
			}
		}
		return l, err
	})
	if err != nil {
		return nil, err
	}
	rec.log = l
	rec.reg = rec.log.Register(b)
	return rec, nil
}

// release gives back the recorder's registration (its bounds); nil-safe.
func (rec *eventRecorder) release() {
	if rec != nil && rec.reg != nil {
		rec.reg.Release()
		rec.reg = nil
	}
}

// eventLog is the log the recorder keeps the events in.
func (rec *eventRecorder) eventLog() *eventlog.Log { return rec.log }

// status summarises the recorder's settings for the admin API.
func (rec *eventRecorder) status() *adminapi.Events {
	b := rec.log.Bounds()
	es := &adminapi.Events{Bodies: rec.bodies, MaxBody: rec.maxBody, MaxEvents: b.MaxEvents, MaxBytes: b.MaxBytes,
		RetainSeconds: b.Retain.Seconds(), MaxRejections: b.MaxRejections, Dir: rec.dir}
	for name := range rec.allow {
		if !slices.Contains(defaultEventHeaders, name) {
			es.Headers = append(es.Headers, name)
		}
	}
	slices.Sort(es.Headers)
	return es
}

// record is the one call where the handler answers: an accepted event
// (it reached dispatch, or was answered without one) is kept with its
// outcome; a refusal is counted in its address's row.
func (rec *eventRecorder) record(ex *exchange, status int, body []byte, herr *hookError) {
	key := rec.lockout.KeyOf(ex.ip)
	client, bits := rec.lockout.display(key)
	reason := ""
	if herr != nil {
		reason = rec.tokens.redact(herr.reason) // some reasons echo what was sent
	}
	if ex.items == nil && herr != nil {
		hook := rec.tokens.redact(ex.sub)
		if herr.reason == reasonQueryToken {
			hook = "" // it held a token
		}
		rec.log.Reject(eventlog.Refusal{Time: ex.now, Client: client, Bits: bits, Key: key, Status: status,
			Reason: reason, Hook: hook, Locked: herr.reason == reasonLockedOut})
		return
	}
	now := time.Now()
	box := new(eventBox) // the event and its first action in one allocation
	e := &box.e
	*e = eventlog.Event{Time: ex.now, Path: rec.base, Hook: rec.tokens.redact(ex.sub), Route: ex.route, Mapping: ex.mapping,
		Client: client, ClientBits: bits, Auth: authOf(ex), Status: status, IdemKey: rec.tokens.redact(rec.idem.key(ex)),
		Tracked: rec.spooled && ex.items != nil, Latency: now.Sub(ex.now), Reason: reason}
	if herr == nil && ex.skip != "" {
		e.Reason = rec.tokens.redact(ex.skip) // a 204: the mapping and why it dispatched nothing
	}
	e.Headers = rec.headers(ex.r.Header)
	e.Dispatch = rec.outcomes(box.d[:0], ex.items, status, body, reason, ex.route == "challenge", now)
	e.ID = e.Dispatch[0].ID
	if rec.bodies {
		rec.keepBody(e, ex.body)
		rec.keepReplay(e, ex.items, ex.ip)
	}
	rec.log.Accept(e)
}

// eventBox allocates an event with room for one action.
type eventBox struct {
	e eventlog.Event
	d [1]eventlog.Dispatch
}

// authOf says how the request authenticated.
func authOf(ex *exchange) string {
	switch {
	case ex.tokenOK:
		return "token"
	case len(ex.verified) > 0:
		return "signature " + ex.verified[0].Scheme()
	case ex.answer != nil:
		return "handshake " + ex.handshakeBy
	}
	return "none"
}

// headers lists the request's header names, with the values of the
// allow-listed ones (cut at maxHeaderValue); a hook token, or a piece of
// one, in a name or a value is redacted (before the cut).
func (rec *eventRecorder) headers(hd http.Header) []eventlog.Header {
	out := make([]eventlog.Header, 0, len(hd))
	for name, vs := range hd {
		h := eventlog.Header{Name: rec.tokens.redact(name)}
		if rec.allow[name] && len(vs) > 0 {
			h.Value, h.Shown = rec.tokens.redactCut(vs[0], maxHeaderValue), true
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
func (rec *eventRecorder) outcomes(dst []eventlog.Dispatch, items []prepared, status int, body []byte, failed string, challenge bool, now time.Time) []eventlog.Dispatch {
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
	if failed == "" && !rec.spooled && len(items) > 1 {
		ids = runIDs(body, len(items))
	}
	for i := range items {
		d := eventlog.Dispatch{ID: items[i].eventID, Kind: items[i].kind.String(), Updated: now}
		switch {
		case failed != "":
			d.State, d.Error = eventlog.StateFailed, failed
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

// keepBody keeps the request body, cut at max_body, with every hook
// token, or piece of one, replaced (redacted before the cut: a token
// across the cut leaves nothing of itself).
func (rec *eventRecorder) keepBody(e *eventlog.Event, body []byte) {
	e.BodyBytes = len(body)
	var notes []string
	text := string(body)
	if clean := rec.tokens.redact(text); len(clean) != len(text) || clean != text {
		text = clean
		notes = append(notes, "the hook token was replaced")
	}
	if len(text) > rec.maxBody {
		text = text[:rec.maxBody]
		notes = append([]string{fmt.Sprintf("cut at max_body (%d of %d bytes)", len(text), len(body))}, notes...)
	}
	e.BodyNote = strings.Join(notes, "; ")
	e.Body = []byte(text)
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
	// KeySource says who chose the session key the policy resolved:
	// "request" (the payload, a templated key, a transform), "operator"
	// (a mapping's static key) or "none" (the default or a generated
	// key). Events kept before it existed lack it (see keptKeySource).
	KeySource string `json:"key_source,omitempty"`
}

// edgeHeaders are the headers a gateway request gets from the edge at
// send time; a replay sends its own.
var edgeHeaders = []string{"Authorization", "X-Forwarded-For", "Traceparent", "Tracestate", "Idempotency-Key"}

// keepReplay keeps what replaying the event needs, unless it is larger
// than max_body or carries a hook token or a piece of one (a replay sends
// it as it was, so it is not kept redacted).
func (rec *eventRecorder) keepReplay(e *eventlog.Event, items []prepared, ip netip.Addr) {
	if len(items) == 0 {
		e.ReplayNote = "nothing was dispatched"
		return
	}
	out := make([]replayItem, len(items))
	size := 0
	for i := range items {
		it := &items[i]
		out[i] = replayItem{Kind: it.kind.String(), Mode: it.mode, Path: it.path, Body: it.body, Forward: it.forward,
			KeySource: it.keySource.String()}
		if ip.IsValid() {
			out[i].ClientIP = ip.String()
		}
		if it.header != nil {
			out[i].Header = it.header.Clone()
			for _, n := range edgeHeaders {
				delete(out[i].Header, n)
			}
		}
		if rec.tokens.holds(string(it.body)) || rec.tokens.headerHolds(out[i].Header) {
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

// replayRefusedError is why an event cannot be replayed, and the admin API's
// status for it.
type replayRefusedError struct {
	status int
	msg    string
}

func (r replayRefusedError) Error() string { return r.msg }

// replay dispatches the kept gateway requests of event id again,
// through the handler's own path (snk: the gateway now, or the spool or
// the cluster queue when configured), each with a new idempotency key derived
// from the original event's, so that the gateway runs it again. The
// replay is an event of its own (replay_of names the original), which the
// answer names.
func (rec *eventRecorder) replay(ctx context.Context, id string, snk sink) (*adminapi.Replay, error) {
	orig, data, ok := rec.log.Get(id)
	switch {
	case !ok:
		return nil, replayRefusedError{http.StatusNotFound, fmt.Sprintf("no event %q in the log of %s (it may have been evicted)", id, rec.base)}
	case data == nil:
		why := orig.ReplayNote
		if why == "" {
			why = "what the gateway was sent is kept only with events { bodies on }"
		}
		return nil, replayRefusedError{http.StatusConflict, fmt.Sprintf("event %s cannot be replayed: %s", orig.ID, why)}
	}
	var kept []replayItem
	if err := json.Unmarshal(data, &kept); err != nil || len(kept) == 0 {
		return nil, replayRefusedError{http.StatusConflict, fmt.Sprintf("event %s cannot be replayed: its kept requests are unreadable", orig.ID)}
	}
	now := time.Now()
	if why := rec.replayRefused(orig.Route, kept, now); why != "" {
		return nil, replayRefusedError{http.StatusConflict, fmt.Sprintf("event %s cannot be replayed: %s", orig.ID, why)}
	}
	items := make([]prepared, len(kept))
	var ip netip.Addr
	for i, k := range kept {
		seed := orig.ID + "\x00replay\x00" + strconv.FormatInt(now.UnixNano(), 10) + "\x00" + strconv.Itoa(i)
		eid := uuid.NewSHA1(eventNamespace, []byte(seed)).String()
		kind := kindAgent
		if k.Kind == kindWake.String() {
			kind = kindWake
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
	status, body, herr := snk.deliver(ctx, items, 0, ip)
	if herr != nil {
		status = herr.status
	}
	e := &eventlog.Event{Time: now, Path: rec.base, Hook: orig.Hook, Route: orig.Route, Mapping: orig.Mapping,
		Auth: "replay", Status: status, IdemKey: items[0].eventID, ReplayOf: orig.ID, Headers: orig.Headers,
		BodyBytes: orig.BodyBytes, BodyNote: orig.BodyNote, Replay: data, Tracked: rec.spooled}
	if orig.Body != nil {
		e.Body = []byte(*orig.Body)
	}
	if ip.IsValid() {
		e.Client, e.ClientBits = rec.lockout.display(rec.lockout.KeyOf(ip))
	}
	if herr != nil {
		e.Reason = herr.reason
	}
	e.Latency = time.Since(now)
	failed := ""
	if herr != nil {
		failed = herr.reason
	}
	e.Dispatch = rec.outcomes(nil, items, status, body, failed, false, now.Add(e.Latency))
	e.ID = e.Dispatch[0].ID
	rec.log.Accept(e)
	rec.logger.Info("event replayed through the admin API", zap.String("event", orig.ID), zap.String("replay", e.ID))
	ans := &adminapi.Replay{ID: e.ID, ReplayOf: orig.ID, Status: status, OK: herr == nil}
	if herr != nil {
		ans.Reason = herr.reason
	} else if json.Valid(body) {
		ans.Reply = body
	}
	return ans, nil
}

// replayRefused says why today's lockout or policy refuses a replay of
// the kept requests of an event answered on route (wake, agent or a
// mapping's id), or "": the original client address must not be locked
// out now, and every action the edge's policy resolved then (a render
// action; in forward mode a /wake or /agent request) must pass the policy
// in force now, as sent (policy.Recheck). A request forwarded to the
// gateway's own mappings meets the gateway's policy there.
func (rec *eventRecorder) replayRefused(route string, kept []replayItem, now time.Time) string {
	if ip, err := netip.ParseAddr(kept[0].ClientIP); err == nil {
		if left, locked := rec.lockout.Locked(ip, now); locked {
			return fmt.Sprintf("its client address %s is locked out for %s more (lift the lockout first)", ip, left.Round(time.Second))
		}
	}
	fromRequest := route == routeWake || route == routeAgent
	for i := range kept {
		k := &kept[i]
		if k.Forward && !fromRequest {
			continue
		}
		var f fields
		if err := json.Unmarshal(k.Body, &f); err != nil {
			return "its kept request is not a JSON object"
		}
		var a action
		var err error
		if k.Kind == kindWake.String() {
			a, err = decodeWake(f)
		} else {
			a, err = rec.policy.decodeAgent(f)
		}
		if err == nil {
			a.fromRequest = fromRequest
			a.keySource = rec.keptKeySource(k, a.SessionKey)
			err = rec.policy.Recheck(a)
		}
		if err != nil {
			return "today's policy refuses it: " + err.Error()
		}
	}
	return ""
}

// keptKeySource is who chose a kept request's session key: as recorded,
// or, for an event kept before that was recorded, none when key is
// today's default_session_key or one the edge generates (hook:<uuid>),
// else the request (the strictest reading).
func (rec *eventRecorder) keptKeySource(k *replayItem, key string) keySource {
	switch k.KeySource {
	case "none":
		return keyNone
	case "operator":
		return keyOperator
	case "":
		if key == "" || rec.policy.assigns(key) {
			return keyNone
		}
	}
	return keyRequest
}
