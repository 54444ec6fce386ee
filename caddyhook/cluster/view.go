package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// The cluster view: from any node, the event list, one event, the rates,
// the delivery health and the live tail of every node. Nothing is shared
// ahead of time (no stream of every event): a node that wants the view
// asks every node (a ViewRequest on TopicView, by request and reply with
// a deadline) and merges the answers; a live tail asks every node to
// send what changes to its inbox (TailBatch) for a lease it renews. The
// cost is paid while someone looks, by the nodes asked, off their request
// path.
//
// Each message is JSON, version ViewVersion, sealed by the engine with
// the cluster's keys (a request for its subject, an answer for its
// request's reply subject, a tail batch for its inbox), and read by one
// function, DecodeView, which accepts only what NormalizeView leaves as
// it is: bounded counts and sizes, ids, node names, states and statuses
// from allow-lists, every other text one printable line (a body: valid
// UTF-8), so that nothing another node sends reaches the console or a
// terminal unchecked.

// TopicView is the topic of the view's requests.
const TopicView = "view"

// ViewVersion is the version of the view's messages (internal/version.ViewMessage).
const ViewVersion = 1

// Operations of a view request.
const (
	ViewList   = "list"   // a page of the event list (Query: the filter)
	ViewDetail = "detail" // one event (Event: its id)
	ViewRates  = "rates"  // the last hour's rates
	ViewHealth = "health" // the node's delivery facts
	ViewTail   = "tail"   // send the changes to Inbox until Until
)

var viewOps = map[string]bool{ViewList: true, ViewDetail: true, ViewRates: true, ViewHealth: true, ViewTail: true}

// Bounds of the view's messages.
const (
	// MaxViewBytes bounds one message before its seal (the NATS servers'
	// default max_payload is 1 MiB).
	MaxViewBytes = 768 << 10
	// MaxViewEntries bounds the entries of one answer or batch.
	MaxViewEntries = eventlog.MaxLimit
	// MaxViewBody bounds the body an event's detail carries.
	MaxViewBody = 256 << 10
	// MaxViewHeaders and MaxViewDispatch bound an event's headers and
	// actions.
	MaxViewHeaders  = 128
	MaxViewDispatch = 512
	// MaxTailLease bounds how far ahead a tail's lease may run.
	MaxTailLease = time.Minute
	// ViewWindow is how old a request may be (beyond the clock skew) and
	// still be answered: they are answered at once.
	ViewWindow = 30 * time.Second
	// ViewAnswerBudget is what the entries of one answer (or an event's
	// detail) may take, leaving room for the rest of it.
	ViewAnswerBudget = MaxViewBytes * 7 / 8
)

// viewQueryKeys are the filter parameters a request may carry.
var viewQueryKeys = map[string]bool{"hook": true, "status": true, "reason": true, "since": true, "before": true,
	"limit": true, "node": true}

var (
	viewIDRe    = regexp.MustCompile(`^[0-9a-f]{16}$`)
	viewInboxRe = regexp.MustCompile(`^_INBOX\.[A-Za-z0-9]{8,64}$`)
	cursorRe    = regexp.MustCompile(`^[0-9]{1,20}$`)
)

// ViewRequest asks every node for its part of the view.
type ViewRequest struct {
	ID    string            `json:"id"`   // 16 lower-case hex digits, random (NewViewID)
	From  string            `json:"from"` // the asking node (it answers itself)
	Time  time.Time         `json:"time"`
	Op    string            `json:"op"`
	Query map[string]string `json:"query,omitempty"` // list, tail: the filter
	Event string            `json:"event,omitempty"` // detail: an event or action id
	Inbox string            `json:"inbox,omitempty"` // tail: where the batches go
	Until time.Time         `json:"until,omitzero"`  // tail: the lease's end
	// Reply is the subject the answers go to; the engine checks that the
	// request came with it (a request replayed to another reply subject
	// is not answered).
	Reply string `json:"reply"`
}

// ViewAnswer is one node's part.
type ViewAnswer struct {
	ID   string    `json:"id"` // the request's
	Node string    `json:"node"`
	Path string    `json:"path"` // the answering handler's base path
	Time time.Time `json:"time"`
	// Error says why the node has no part (its event log is off, …).
	Error  string              `json:"error,omitempty"`
	Page   *ViewPage           `json:"page,omitempty"`
	Event  *eventlog.EventJSON `json:"event,omitempty"` // detail: the event, when this node holds it
	Rates  *eventlog.RatesJSON `json:"rates,omitempty"`
	Health *DeliveryFacts      `json:"health,omitempty"` // nil: it does not deliver
	Tail   bool                `json:"tail,omitempty"`   // it follows the tail
}

// ViewPage is one node's page of the event list, newest first.
type ViewPage struct {
	Entries []ViewEntry `json:"entries"`
	// More: the node holds more entries than it sent, older than the last one.
	More bool `json:"more,omitempty"`
}

// ViewEntry is an event (or an operator's action) or a rejection row.
type ViewEntry struct {
	Event *eventlog.EventJSON     `json:"event,omitempty"`
	Rows  *eventlog.RejectionJSON `json:"rejections,omitempty"`
}

// Value is the entry itself (*EventJSON or *RejectionJSON; nil when empty).
func (e ViewEntry) Value() any {
	if e.Event != nil {
		return e.Event
	}
	if e.Rows != nil {
		return e.Rows
	}
	return nil
}

// Time is when the entry happened (the list's order).
func (e ViewEntry) Time() time.Time {
	if e.Event != nil {
		return e.Event.Time
	}
	if e.Rows != nil {
		return e.Rows.Time
	}
	return time.Time{}
}

// TailBatch is what changed on a node since its last batch.
type TailBatch struct {
	Inbox string    `json:"inbox"` // the tail's inbox (its identity)
	Node  string    `json:"node"`
	N     uint64    `json:"n"` // the node's batch number for this tail, from 1
	Time  time.Time `json:"time"`
	// Lost: the node fell behind its own log; some changes are missing.
	Lost bool `json:"lost,omitempty"`
	// Skipped counts the changes left out since its last batch: a tail
	// carries at most a bounded number a second from each node.
	Skipped uint64      `json:"skipped,omitempty"`
	Entries []ViewEntry `json:"entries,omitempty"`
	// Done: the node stops sending (the lease ended, or it stops).
	Done bool `json:"done,omitempty"`
}

// ViewMessage is one decoded message: exactly one of its fields is set.
type ViewMessage struct {
	Request *ViewRequest
	Answer  *ViewAnswer
	Tail    *TailBatch
}

// viewWire is the JSON of every view message.
type viewWire struct {
	V       int          `json:"v"`
	Request *ViewRequest `json:"request,omitempty"`
	Answer  *ViewAnswer  `json:"answer,omitempty"`
	Tail    *TailBatch   `json:"tail,omitempty"`
}

// Views is a Backend that carries the cluster view (an engine may leave
// it out: the view then shows this node alone). Every message is sealed
// with the cluster's keys and read with DecodeView.
type Views interface {
	// AskView sends q (its Reply set by the engine) to every node serving
	// the view in this namespace and calls fn with each answer to it,
	// from one goroutine, until fn returns true or ctx ends.
	AskView(ctx context.Context, q ViewRequest, fn func(ViewAnswer) (done bool)) error
	// ServeView calls fn with every request of another node and sends
	// back its answer, until stop; fn may run concurrently, and a node
	// answers at most a few requests at once (the others go unanswered).
	ServeView(fn func(ViewRequest) ViewAnswer) (stop func(), err error)
	// FollowView opens an inbox for tail batches: fn is called with each,
	// in order of arrival, from one goroutine.
	FollowView(fn func(TailBatch)) (inbox string, stop func(), err error)
	// SendTail sends b to its inbox.
	SendTail(b TailBatch) error
}

// NewViewID returns a random request id.
func NewViewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errView is every reason DecodeView refuses a message for.
var errView = errors.New("malformed cluster view message")

// ErrNewerView: a view message of a version newer than this build reads.
var ErrNewerView = errors.New("cluster view message of a newer version")

// EncodeView is the message of m, normalized; an error when m is not one
// message, or is too large.
func EncodeView(m ViewMessage) ([]byte, error) {
	m = NormalizeView(m)
	w := viewWire{V: ViewVersion, Request: m.Request, Answer: m.Answer, Tail: m.Tail}
	if n := countSet(m); n != 1 {
		return nil, fmt.Errorf("%w: %d kinds in one message", errView, n)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	msg := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(msg) > MaxViewBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", errView, len(msg), MaxViewBytes)
	}
	return msg, nil
}

// ViewVersionOf is the version a view message says it is (0 when it says
// none readable), for the log and metrics of a message refused.
func ViewVersionOf(msg []byte) int {
	var w struct {
		V int `json:"v"`
	}
	_ = json.Unmarshal(msg, &w)
	return w.V
}

// countSet counts the kinds m carries.
func countSet(m ViewMessage) int {
	n := 0
	for _, set := range []bool{m.Request != nil, m.Answer != nil, m.Tail != nil} {
		if set {
			n++
		}
	}
	return n
}

// DecodeView is the one function that reads a view message from another
// node (after its seal opened): within MaxViewBytes, version ViewVersion,
// exactly one kind, no unknown field, and nothing NormalizeView would
// change; times later than now+skew are clamped to now. A request older
// than ViewWindow (plus the skew), or whose tail lease runs more than
// MaxTailLease ahead, is refused. A newer version is refused with an
// error wrapping ErrNewerView.
func DecodeView(msg []byte, now time.Time, skew time.Duration) (ViewMessage, error) {
	if len(msg) > MaxViewBytes {
		return ViewMessage{}, fmt.Errorf("%w: %d bytes, more than %d", errView, len(msg), MaxViewBytes)
	}
	var w viewWire
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return ViewMessage{}, fmt.Errorf("%w: %v", errView, err)
	}
	if dec.More() {
		return ViewMessage{}, fmt.Errorf("%w: trailing data", errView)
	}
	switch {
	case w.V > ViewVersion:
		return ViewMessage{}, fmt.Errorf("%w: version %d", ErrNewerView, w.V)
	case w.V != ViewVersion:
		return ViewMessage{}, fmt.Errorf("%w: version %d", errView, w.V)
	}
	m := ViewMessage{Request: w.Request, Answer: w.Answer, Tail: w.Tail}
	if n := countSet(m); n != 1 {
		return ViewMessage{}, fmt.Errorf("%w: %d kinds in one message", errView, n)
	}
	if err := checkView(m); err != nil {
		return ViewMessage{}, err
	}
	limit := now.Add(skew)
	switch {
	case m.Request != nil:
		q := m.Request
		switch {
		case q.Time.Before(now.Add(-ViewWindow - skew)):
			return ViewMessage{}, fmt.Errorf("%w: a request sent %s ago", errView, now.Sub(q.Time).Round(time.Second))
		case q.Op == ViewTail && q.Until.After(limit.Add(MaxTailLease)):
			return ViewMessage{}, fmt.Errorf("%w: a tail lease %s ahead", errView, q.Until.Sub(now).Round(time.Second))
		}
		q.Time = clampTime(q.Time, now, limit)
	case m.Answer != nil:
		m.Answer.Time = clampTime(m.Answer.Time, now, limit)
	default:
		m.Tail.Time = clampTime(m.Tail.Time, now, limit)
	}
	return m, nil
}

// clampTime is t, or now when t is later than limit.
func clampTime(t, now, limit time.Time) time.Time {
	if t.After(limit) {
		return now
	}
	return t
}

// checkView refuses a decoded message that NormalizeView would change,
// or whose required fields are missing.
func checkView(m ViewMessage) error {
	switch {
	case m.Request != nil:
		q := m.Request
		switch {
		case !viewIDRe.MatchString(q.ID):
			return fmt.Errorf("%w: request id", errView)
		case !outcomeNodeRe.MatchString(q.From):
			return fmt.Errorf("%w: request from", errView)
		case !viewOps[q.Op]:
			return fmt.Errorf("%w: operation %q", errView, safetext.Line(q.Op))
		case !viewInboxRe.MatchString(q.Reply):
			return fmt.Errorf("%w: reply subject", errView)
		case q.Op == ViewDetail && !outcomeIDRe.MatchString(q.Event):
			return fmt.Errorf("%w: detail without an event id", errView)
		case q.Op == ViewTail && (!viewInboxRe.MatchString(q.Inbox) || q.Until.IsZero()):
			return fmt.Errorf("%w: tail without its inbox or lease", errView)
		case q.Time.IsZero():
			return fmt.Errorf("%w: no time", errView)
		}
	case m.Answer != nil:
		a := m.Answer
		switch {
		case !viewIDRe.MatchString(a.ID):
			return fmt.Errorf("%w: answer id", errView)
		case !outcomeNodeRe.MatchString(a.Node):
			return fmt.Errorf("%w: answer node", errView)
		case a.Time.IsZero():
			return fmt.Errorf("%w: no time", errView)
		}
	case m.Tail != nil:
		b := m.Tail
		switch {
		case !viewInboxRe.MatchString(b.Inbox):
			return fmt.Errorf("%w: tail inbox", errView)
		case !outcomeNodeRe.MatchString(b.Node):
			return fmt.Errorf("%w: tail node", errView)
		case b.N == 0 || b.Time.IsZero():
			return fmt.Errorf("%w: tail batch without its number or time", errView)
		}
	}
	n := NormalizeView(m)
	if !sameJSON(n, m) {
		return fmt.Errorf("%w: a field out of bounds", errView)
	}
	return nil
}

// sameJSON reports whether a and b encode alike.
func sameJSON(a, b ViewMessage) bool {
	ja, err1 := json.Marshal(viewWire{Request: a.Request, Answer: a.Answer, Tail: a.Tail})
	jb, err2 := json.Marshal(viewWire{Request: b.Request, Answer: b.Answer, Tail: b.Tail})
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// NormalizeView returns m as DecodeView returns it once it has crossed
// (a deep copy: m is not changed): node names as NodeName makes them,
// ids, states and statuses that are not allowed dropped (an entry, an
// action or a header beyond its bound too), every text one printable
// line (safetext.Line), a body valid UTF-8 cut at MaxViewBody, times in
// UTC.
func NormalizeView(m ViewMessage) ViewMessage {
	var out ViewMessage
	if q := m.Request; q != nil {
		c := *q
		c.From = NodeName(c.From)
		c.Time, c.Until = c.Time.UTC(), c.Until.UTC()
		if !viewOps[c.Op] {
			c.Op = ""
		}
		if len(q.Query) > 0 {
			c.Query = map[string]string{}
			for k, v := range q.Query {
				if viewQueryKeys[k] {
					c.Query[k] = safetext.Line(v)
				}
			}
		}
		if !outcomeIDRe.MatchString(c.Event) {
			c.Event = ""
		}
		out.Request = &c
	}
	if a := m.Answer; a != nil {
		c := *a
		c.Node = NodeName(c.Node)
		c.Path, c.Error, c.Time = safetext.Line(c.Path), safetext.Line(c.Error), c.Time.UTC()
		if a.Page != nil {
			c.Page = &ViewPage{Entries: normEntries(a.Page.Entries), More: a.Page.More}
		}
		if a.Event != nil {
			e := normEvent(*a.Event, true)
			c.Event = &e
		}
		if a.Rates != nil {
			r := normRates(*a.Rates)
			c.Rates = &r
		}
		if a.Health != nil {
			h := normFacts(*a.Health)
			c.Health = &h
		}
		out.Answer = &c
	}
	if b := m.Tail; b != nil {
		c := *b
		c.Node = NodeName(c.Node)
		c.Time = c.Time.UTC()
		c.Entries = normEntries(b.Entries)
		out.Tail = &c
	}
	return out
}

// normEntries normalizes entries, dropping the empty and those past the bound.
func normEntries(es []ViewEntry) []ViewEntry {
	if es == nil {
		return nil
	}
	out := make([]ViewEntry, 0, min(len(es), MaxViewEntries))
	for _, en := range es {
		if len(out) == MaxViewEntries {
			break
		}
		switch {
		case en.Event != nil && en.Rows == nil:
			e := normEvent(*en.Event, false)
			out = append(out, ViewEntry{Event: &e})
		case en.Rows != nil && en.Event == nil:
			r := normRow(*en.Rows)
			out = append(out, ViewEntry{Rows: &r})
		}
	}
	return out
}

// eventStates are the dispatch states an event may show (an allow-list).
var eventStates = map[string]bool{"": true, eventlog.StateSent: true, eventlog.StateFailed: true, eventlog.StateQueued: true,
	eventlog.StateRetrying: true, eventlog.StateDelivered: true, eventlog.StateDead: true, eventlog.StateDropped: true,
	eventlog.StateDuplicate: true, eventlog.StateSkipped: true, eventlog.StateChallenge: true}

// normEvent normalizes an event; its body only in a detail.
func normEvent(e eventlog.EventJSON, detail bool) eventlog.EventJSON {
	if e.Type != eventlog.TypeOperator {
		e.Type = "event"
	}
	if !cursorRe.MatchString(e.Cursor) {
		e.Cursor = ""
	}
	if !outcomeIDRe.MatchString(e.ID) {
		e.ID = ""
	}
	e.Time = e.Time.UTC()
	for _, s := range []*string{&e.Path, &e.Hook, &e.Route, &e.Mapping, &e.Client, &e.Auth, &e.Reason, &e.IdemKey,
		&e.ReplayOf, &e.Error, &e.BodyNote, &e.ReplayNote, &e.Operator, &e.Action, &e.Target} {
		*s = safetext.Line(*s)
	}
	e.Node = NodeName(e.Node)
	e.RunID = cutRunID(safetext.Line(e.RunID))
	e.Status = statusOr0(e.Status)
	if !eventStates[e.State] {
		e.State = ""
	}
	e.LatencyMs = finite(e.LatencyMs, 1e9)
	e.BodyBytes = min(max(e.BodyBytes, 0), math.MaxInt32)
	if e.Dispatch != nil {
		ds := make([]eventlog.Dispatch, 0, min(len(e.Dispatch), MaxViewDispatch))
		for _, d := range e.Dispatch {
			if len(ds) == MaxViewDispatch {
				break
			}
			if !outcomeIDRe.MatchString(d.ID) || !eventStates[d.State] || d.State == "" {
				continue
			}
			d.Kind, d.Error = safetext.Line(d.Kind), safetext.Line(d.Error)
			d.RunID = cutRunID(safetext.Line(d.RunID))
			d.Node = NodeName(d.Node)
			d.GatewayStatus = statusOr0(d.GatewayStatus)
			d.Attempts = min(max(d.Attempts, 0), maxAttempts)
			d.Updated = d.Updated.UTC()
			ds = append(ds, d)
		}
		e.Dispatch = ds
	}
	if !detail {
		e.Headers, e.Body = nil, nil
		return e
	}
	if e.Headers != nil {
		hs := make([]eventlog.Header, 0, min(len(e.Headers), MaxViewHeaders))
		for _, h := range e.Headers {
			if len(hs) == MaxViewHeaders {
				break
			}
			h.Name, h.Value = safetext.Line(h.Name), safetext.Line(h.Value)
			if h.Name == "" {
				continue
			}
			hs = append(hs, h)
		}
		e.Headers = hs
	}
	if e.Body != nil {
		b := cutText(strings.ToValidUTF8(*e.Body, "\uFFFD"), MaxViewBody)
		e.Body = &b
	}
	return e
}

// normRow normalizes a rejection row.
func normRow(r eventlog.RejectionJSON) eventlog.RejectionJSON {
	r.Type = "rejections"
	if !cursorRe.MatchString(r.Cursor) {
		r.Cursor = ""
	}
	r.Time, r.Last, r.Minute = r.Time.UTC(), r.Last.UTC(), r.Minute.UTC()
	r.Client, r.Reason, r.Hook = safetext.Line(r.Client), safetext.Line(r.Reason), safetext.Line(r.Hook)
	r.Node = NodeName(r.Node)
	r.Status = statusOr0(r.Status)
	return r
}

// normRates normalizes rates: every series eventlog's length, finite and
// not negative.
func normRates(r eventlog.RatesJSON) eventlog.RatesJSON {
	r.StepSeconds = int(eventlog.SeriesStep / time.Second)
	r.Start = r.Start.UTC()
	for _, s := range []*[]float64{&r.Accepted, &r.Rejected, &r.Locked, &r.LatencyAvgMs, &r.LatencyMaxMs} {
		v := make([]float64, eventlog.SeriesLen)
		for i := range min(len(*s), len(v)) {
			v[i] = finite((*s)[i], 1e12)
		}
		*s = v
	}
	return r
}

// normFacts normalizes a node's delivery facts.
func normFacts(f DeliveryFacts) DeliveryFacts {
	f.InFlight = min(max(f.InFlight, 0), 1<<20)
	f.Workers = min(max(f.Workers, 0), 1<<20)
	f.LastError = safetext.Line(f.LastError)
	f.Progress, f.LastSuccess, f.LastErrorAt = f.Progress.UTC(), f.LastSuccess.UTC(), f.LastErrorAt.UTC()
	f.Rate = finite(f.Rate, 1e9)
	return f
}

// statusOr0 is a status code, or 0 when it is not one.
func statusOr0(s int) int {
	if s < 100 || s > 599 {
		return 0
	}
	return s
}

// finite is v when it is a finite number between 0 and limit, else 0.
func finite(v, limit float64) float64 {
	if math.IsNaN(v) || v < 0 || v > limit {
		return 0
	}
	return v
}

// cutText cuts s at n bytes on a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s[len(s)-min(len(s), utf8.UTFMax):]) {
		s = s[:len(s)-1]
	}
	return s
}

// MergeRates adds up the rates of several nodes: the counts summed, the
// mean time at the edge weighted by the accepted requests, the maximum
// the largest. The steps are aligned on the newest start.
func MergeRates(parts []eventlog.RatesJSON) eventlog.RatesJSON {
	if len(parts) == 0 {
		return eventlog.RatesJSON{}
	}
	start := parts[0].Start
	for _, p := range parts[1:] {
		if p.Start.After(start) {
			start = p.Start
		}
	}
	n := eventlog.SeriesLen
	out := eventlog.RatesJSON{StepSeconds: int(eventlog.SeriesStep / time.Second), Start: start,
		Accepted: make([]float64, n), Rejected: make([]float64, n), Locked: make([]float64, n),
		LatencyAvgMs: make([]float64, n), LatencyMaxMs: make([]float64, n)}
	for _, p := range parts {
		shift := int(start.Sub(p.Start) / eventlog.SeriesStep) // p's step i is out's step i-shift
		for i := range n {
			j := i + shift
			if j < 0 || j >= len(p.Accepted) || j >= len(p.LatencyAvgMs) || j >= len(p.Rejected) ||
				j >= len(p.Locked) || j >= len(p.LatencyMaxMs) {
				continue
			}
			out.LatencyAvgMs[i] += p.LatencyAvgMs[j] * p.Accepted[j]
			out.Accepted[i] += p.Accepted[j]
			out.Rejected[i] += p.Rejected[j]
			out.Locked[i] += p.Locked[j]
			out.LatencyMaxMs[i] = max(out.LatencyMaxMs[i], p.LatencyMaxMs[j])
		}
	}
	for i := range n {
		if out.Accepted[i] > 0 {
			out.LatencyAvgMs[i] /= out.Accepted[i]
		} else {
			out.LatencyAvgMs[i] = 0
		}
	}
	return out
}

// MergePage merges the nodes' pages newest first into at most limit
// entries (more when several share the last one's time), none older than
// what a node that holds more sent last (so that no entry of it is
// skipped); more reports entries left for a next page, which starts
// before the last entry's time.
func MergePage(pages [][]ViewEntry, more []bool, limit int) (entries []ViewEntry, next bool) {
	var cut time.Time // no entry older than this: a node with more has older ones unsent
	var all []ViewEntry
	for i, p := range pages {
		all = append(all, p...)
		if i < len(more) && more[i] && len(p) > 0 {
			if t := p[len(p)-1].Time(); t.After(cut) {
				cut = t
			}
		}
	}
	slices.SortStableFunc(all, func(a, b ViewEntry) int { return b.Time().Compare(a.Time()) })
	for i, en := range all {
		t := en.Time()
		if t.Before(cut) {
			return all[:i], true
		}
		if i >= limit && !t.Equal(all[i-1].Time()) {
			return all[:i], true
		}
	}
	return all, !cut.IsZero()
}
