package tmpl

import (
	"time"

	"cel.dev/cel-go/interpreter"
)

// Vars is what templates and CEL expressions see for one request.
type Vars struct {
	// Payload is the decoded JSON body (encoding/json shapes: numbers are
	// float64). nil behaves as an empty object.
	Payload map[string]any
	// Headers maps lower-cased header names to their values, joined with
	// ", " when a header is repeated.
	Headers map[string]string
	// Query maps query parameter names to their first value.
	Query map[string]string
	// Path is the hook sub-path.
	Path string
	// Event is the event name the mapping's provider gave the request
	// (its verify block's; "" when it has none): {{event}} and CEL's
	// event.
	Event string
	// Now is the request time; the zero time means time.Now() at use.
	Now time.Time
	// Element, when its Key is set, shows Payload with that top-level key
	// holding Element.Value instead: one element of a for_each list,
	// without copying the payload.
	Element Element
}

// Element replaces one top-level key of a payload.
type Element struct {
	Key   string
	Value any
}

// now returns the time `now` stands for.
func (v *Vars) now() time.Time {
	if v.Now.IsZero() {
		return time.Now()
	}
	return v.Now
}

// CEL variable names.
const (
	varPayload = "payload"
	varHeaders = "headers"
	varQuery   = "query"
	varPath    = "path"
	varNow     = "now"
	varEvent   = "event"
)

// activation exposes Vars to CEL without building a map per evaluation:
// (*activation)(v) is a free conversion.
type activation Vars

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	// A nil map is typed here, so CEL sees an empty map.
	case varPayload:
		if a.Element.Key != "" {
			return newElementMap(a.Payload, a.Element), true
		}
		return a.Payload, true
	case varHeaders:
		return a.Headers, true
	case varQuery:
		return a.Query, true
	case varPath:
		return a.Path, true
	case varNow:
		return (*Vars)(a).now(), true
	case varEvent:
		return a.Event, true
	}
	return nil, false
}

// Parent implements interpreter.Activation; there is none.
func (a *activation) Parent() interpreter.Activation { return nil }
