package eventlog

import (
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Dispatch states of an action.
const (
	StateSent      = "sent"      // the gateway answered 2xx (sync)
	StateFailed    = "failed"    // sync dispatch failed (the caller got the error)
	StateQueued    = "queued"    // stored in the spool or the cluster queue
	StateRetrying  = "retrying"  // a delivery attempt failed; another follows
	StateDelivered = "delivered" // a spooled event reached the gateway
	StateDead      = "dead"      // a dead letter
	StateDropped   = "dropped"   // a dead letter dropped by the operator
	StateDuplicate = "duplicate" // an idempotent replay answered from the cache
	StateSkipped   = "skipped"   // nothing to dispatch (a transform returned null)
	StateChallenge = "challenge" // a provider's URL verification, answered at the edge
)

// TypeOperator is the type of an operator's action in a list: an entry
// of the log that is not a request (Event.Action set).
const TypeOperator = "operator"

// Header is one request header of an event: its name, and its value only
// when the caller's allow-list lets it through (Value is then set).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// Shown tells an allow-listed empty value from a hidden one.
	Shown bool `json:"shown,omitempty"`
}

// Dispatch is the outcome of one action of an event as it evolves.
type Dispatch struct {
	ID            string    `json:"id"`
	Kind          string    `json:"kind,omitempty"`
	State         string    `json:"state"`
	GatewayStatus int       `json:"gateway_status,omitempty"`
	RunID         string    `json:"run_id,omitempty"`
	Attempts      int       `json:"attempts"`
	Error         string    `json:"error,omitempty"`
	Node          string    `json:"node,omitempty"`
	Updated       time.Time `json:"updated"`
}

// Event is one answered request that the handler accepted (it reached
// dispatch, or was answered without one: a duplicate, a skip, a
// challenge). The caller fills it in; Accept takes ownership. Every field
// but Dispatch is immutable once accepted; Dispatch changes only through
// Update, under the log's lock.
type Event struct {
	Seq        uint64        // set by Accept: the log's order
	ID         string        // the event id (the first action's id)
	Time       time.Time     // when the request arrived
	Path       string        // the handler's base path
	Hook       string        // the hook name (sub-path)
	Route      string        // wake, agent, a mapping id, …
	Mapping    string        // the mapping that answered, if any
	Client     netip.Addr    // the client address
	ClientBits int           // > 0: shown as this IPv6 prefix (the lockout key)
	Auth       string        // token, signature <scheme>, replay, …
	Status     int           // the status answered
	Reason     string        // why it failed, or why it was skipped (a 204)
	Latency    time.Duration // time at the edge
	IdemKey    string        // the request's idempotency key
	ReplayOf   string        // the event this one replays
	Headers    []Header      // names, and allow-listed values
	Body       []byte        // the request body (bodies on), cut at max_body
	BodyBytes  int           // the body's full length
	// BodyNote says why no (or only part of the) body is kept.
	BodyNote string
	// Replay is what the caller needs to dispatch the event again (opaque
	// to the log); nil when it is not kept, ReplayNote says why.
	Replay     []byte
	ReplayNote string
	Dispatch   []Dispatch
	// Tracked events' dispatch evolves (spooled: queued, delivered, dead):
	// Update finds them by their action ids through an index. Others are
	// found by a scan (the admin API's detail), which keeps the index off
	// the request path of a sync dispatch.
	Tracked bool
	// Action, when set, makes the entry an operator's action (retry,
	// drop, pause, resume, unlock, replay) on Target, by Operator (the
	// authenticated user, or how the admin API was reached); Reason says
	// what it did. It is not a request: no dispatch, not in the rates.
	Action, Operator, Target string

	changed uint64 // journal version of its last change
	size    int64  // accounted bytes
	evicted bool
}

// Per-item overheads of the byte accounting (struct, slice and map
// costs, rounded up).
const (
	eventOverhead    = 512
	headerOverhead   = 48
	dispatchOverhead = 160
	indexOverhead    = 96
)

// accountedSize is what e counts against MaxBytes.
func (e *Event) accountedSize() int64 {
	n := eventOverhead + len(e.ID) + len(e.Path) + len(e.Hook) + len(e.Route) + len(e.Mapping) + len(e.Auth) +
		len(e.Reason) + len(e.IdemKey) + len(e.ReplayOf) + len(e.Body) + len(e.BodyNote) + len(e.Replay) + len(e.ReplayNote) +
		len(e.Action) + len(e.Operator) + len(e.Target)
	for _, h := range e.Headers {
		n += headerOverhead + len(h.Name) + len(h.Value)
	}
	for _, d := range e.Dispatch {
		n += dispatchOverhead + indexOverhead + len(d.ID) + len(d.Kind) + len(d.RunID) + len(d.Error) + len(d.Node)
	}
	return int64(n)
}

// ClientString formats the client address as the lockout keys it.
func ClientString(ip netip.Addr, bits int) string {
	if !ip.IsValid() {
		return ""
	}
	ip = ip.Unmap()
	if ip.Is6() && bits > 0 && bits < 128 {
		if p, err := ip.Prefix(bits); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// EventJSON is an event as the admin API shows it. Body is set in the
// detail view only (as text: the console shows it with textContent).
type EventJSON struct {
	Type      string    `json:"type"` // "event", or TypeOperator for an operator's action
	Cursor    string    `json:"cursor"`
	ID        string    `json:"id"`
	Time      time.Time `json:"time"`
	Path      string    `json:"path"`
	Hook      string    `json:"hook"`
	Route     string    `json:"route,omitempty"`
	Mapping   string    `json:"mapping,omitempty"`
	Client    string    `json:"client"`
	Auth      string    `json:"auth"`
	Status    int       `json:"status"`
	Reason    string    `json:"reason,omitempty"`
	LatencyMs float64   `json:"latency_ms"`
	IdemKey   string    `json:"idempotency_key,omitempty"`
	ReplayOf  string    `json:"replay_of,omitempty"`
	State     string    `json:"state"` // the first action's state ("" without one)
	RunID     string    `json:"run_id,omitempty"`
	// Error is the first action's error: why its last attempt failed, or
	// what killed it (a dead letter keeps the cause).
	Error string `json:"error,omitempty"`
	// Node is the node that answered the request (set in a cluster).
	Node string `json:"node,omitempty"`
	// Action, Operator and Target describe an operator's action.
	Action     string     `json:"action,omitempty"`
	Operator   string     `json:"operator,omitempty"`
	Target     string     `json:"target,omitempty"`
	Dispatch   []Dispatch `json:"dispatch"`
	Headers    []Header   `json:"headers,omitempty"`
	BodyBytes  int        `json:"body_bytes"`
	BodyKept   bool       `json:"body_kept"`
	BodyNote   string     `json:"body_note,omitempty"`
	Body       *string    `json:"body,omitempty"`
	Replayable bool       `json:"replayable"`
	ReplayNote string     `json:"replay_note,omitempty"`
}

// view returns e's JSON form; the caller holds the log's lock (Dispatch
// is copied).
func (e *Event) view(detail bool) EventJSON {
	v := EventJSON{Type: "event", Cursor: cursorOf(e.Time, e.Seq), ID: e.ID, Time: e.Time.UTC(), Path: e.Path, Hook: e.Hook,
		Route: e.Route, Mapping: e.Mapping, Client: ClientString(e.Client, e.ClientBits), Auth: e.Auth,
		Status: e.Status, Reason: e.Reason, LatencyMs: float64(e.Latency.Microseconds()) / 1000, IdemKey: e.IdemKey,
		ReplayOf: e.ReplayOf, Dispatch: slices.Clone(e.Dispatch), BodyBytes: e.BodyBytes,
		BodyKept: e.Body != nil, BodyNote: e.BodyNote, Replayable: e.Replay != nil, ReplayNote: e.ReplayNote,
		Action: e.Action, Operator: e.Operator, Target: e.Target}
	if e.Action != "" {
		v.Type = TypeOperator
	}
	if v.Dispatch == nil {
		v.Dispatch = []Dispatch{}
	}
	if len(e.Dispatch) > 0 {
		v.State, v.RunID, v.Error = e.Dispatch[0].State, e.Dispatch[0].RunID, e.Dispatch[0].Error
	}
	if detail {
		v.Headers = slices.Clone(e.Headers)
		slices.SortFunc(v.Headers, func(a, b Header) int { return strings.Compare(a.Name, b.Name) })
		if e.Body != nil {
			s := validText(e.Body)
			v.Body = &s
		}
	}
	return v
}

// validText returns b as a string with invalid UTF-8 replaced, so that
// the JSON answer carries exactly what is shown.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
