package eventlog

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// List limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Filter selects entries of a list or a stream: by hook name, status
// (a code such as 401, a class such as 4xx, accepted = the events,
// rejected = the rejection rows), reason (a case-insensitive part of it)
// and time; Before is the cursor of the previous page.
type Filter struct {
	Hook   string
	Status string
	// Node selects the entries of one node of a cluster: the log does
	// not know its node, its caller applies it.
	Node   string
	Reason string // lower-cased
	Since  time.Time
	Until  time.Time // before=<RFC 3339 time>
	Before uint64    // before=<cursor>: entries older than it
	Limit  int

	code, class int // parsed Status
}

// ParseFilter reads the query parameters hook, status, reason, since,
// before and limit. since is an RFC 3339 time or a duration back from now
// (10m); before is a cursor from an earlier answer or an RFC 3339 time.
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	f := Filter{Hook: strings.Trim(q.Get("hook"), "/"), Status: strings.ToLower(q.Get("status")),
		Reason: strings.ToLower(q.Get("reason")), Node: q.Get("node"), Limit: DefaultLimit}
	switch s := f.Status; {
	case s == "", s == "accepted", s == "rejected", s == TypeOperator:
	case len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5':
		f.class = int(s[0] - '0')
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return f, fmt.Errorf("status: want a status code (401), a class (4xx), accepted, rejected or operator; got %q", q.Get("status"))
		}
		f.code = n
	}
	if s := q.Get("since"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			f.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			f.Since = t
		} else {
			return f, fmt.Errorf("since: want an RFC 3339 time or a duration such as 10m; got %q", s)
		}
	}
	if s := q.Get("before"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			f.Before = n
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			f.Until = t
		} else {
			return f, fmt.Errorf("before: want a cursor from an earlier answer or an RFC 3339 time; got %q", s)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return f, fmt.Errorf("limit: want a number between 1 and %d; got %q", MaxLimit, s)
		}
		f.Limit = n
	}
	return f, nil
}

// cursorOf is an entry's cursor: its sequence number (the time is not
// needed: the sequence is the log's order).
func cursorOf(_ time.Time, seq uint64) string { return strconv.FormatUint(seq, 10) }

// wantsEvents and wantsRows say which kinds of entries the filter can
// match at all.
func (f *Filter) wantsEvents() bool { return f.Status != "rejected" }
func (f *Filter) wantsRows() bool   { return f.Status != "accepted" && f.Status != TypeOperator }

// common checks the fields events and rows share.
func (f *Filter) common(seq uint64, at time.Time, hook string, status int, reason string) bool {
	switch {
	case f.Before != 0 && seq >= f.Before:
		return false
	case !f.Until.IsZero() && !at.Before(f.Until):
		return false
	case !f.Since.IsZero() && at.Before(f.Since):
		return false
	case f.Hook != "" && hook != f.Hook:
		return false
	case f.code != 0 && status != f.code:
		return false
	case f.class != 0 && status/100 != f.class:
		return false
	case f.Reason != "" && !containsFold(reason, f.Reason):
		return false
	}
	return true
}

// matchEvent and matchRow apply the filter; the caller holds the log's lock.
func (f *Filter) matchEvent(e *Event) bool {
	if (e.Action != "") != (f.Status == TypeOperator) && f.Status != "" {
		return false // an operator's action is no request: only all, or operator, lists it
	}
	return f.wantsEvents() && f.common(e.Seq, e.Time, e.Hook, e.Status, e.Reason)
}

func (f *Filter) matchRow(r *row) bool {
	return f.wantsRows() && f.common(r.seq, time.Unix(0, r.first), r.hook, r.key.status, r.key.reason)
}

// containsFold reports whether s contains the lower-case sub, ignoring
// case (ASCII; the reasons are).
func containsFold(s, sub string) bool {
	if len(sub) > len(s) {
		return false
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
