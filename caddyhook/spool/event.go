package spool

import (
	"fmt"
	"net/http"
	"time"
)

// Event kinds. Wake events are delivered strictly in acceptance order.
const (
	KindWake  = "wake"
	KindAgent = "agent"
)

// Event is one accepted action, stored exactly as it will be sent.
type Event struct {
	ID        string    // event id; also the Idempotency-Key sent to the gateway
	Kind      string    // "wake" or "agent"
	Path      string    // gateway request path, e.g. "/hooks/agent"
	Body      []byte    // the exact JSON body the gateway will receive
	ClientIP  string    // original client address ("" when not forwarded)
	FirstSeen time.Time // acceptance time; MaxAge counts from here
	Attempts  int       // failed delivery attempts so far
	NextTry   time.Time // zero = ready
	LastError string    // for dead letters: the reason; for queued events: the last failure
	Seq       uint64    // store key (acceptance order); set by the store, ignored by Append

	// TraceParent and TraceState are the W3C trace context of the accepted
	// request ("" when none), sent with every delivery attempt.
	TraceParent, TraceState string
	// Header, when not nil, marks a forwarded event: it is sent to Path
	// (which then carries the query) with these headers, the Idempotency-Key
	// among them.
	Header http.Header
	// PathBelowPrefix is a forwarded event's Path below the gateway prefix
	// of the node that accepted it: the delivering node sends it under its
	// own gateway prefix, as it sends a rendered event to its own
	// {prefix}/{kind} (the prefix is the gateway's, which only the
	// delivering node knows). Empty in a record written before it
	// existed: Path is then sent as stored.
	PathBelowPrefix string
}

// maxIDLen bounds an event id (the gateway's Idempotency-Key limit).
const maxIDLen = 256

// validate reports the first missing or malformed field of ev.
func (ev *Event) validate() error {
	switch {
	case ev == nil:
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	case ev.ID == "":
		return fmt.Errorf("%w: empty id", ErrInvalidEvent)
	case len(ev.ID) > maxIDLen:
		return fmt.Errorf("%w: id longer than %d bytes", ErrInvalidEvent, maxIDLen)
	case ev.Kind != KindWake && ev.Kind != KindAgent:
		return fmt.Errorf("%w: kind %q is neither %q nor %q", ErrInvalidEvent, ev.Kind, KindWake, KindAgent)
	case ev.Path == "":
		return fmt.Errorf("%w: empty path", ErrInvalidEvent)
	}
	return nil
}

// isWake reports whether ev belongs to the ordered wake lane.
func (ev *Event) isWake() bool { return ev.Kind == KindWake }
