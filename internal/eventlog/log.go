package eventlog

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/caddyhook/caddyhook/internal/succession"
)

// journalSize is how many changes a live tail can fall behind before it
// is told to start over.
const journalSize = 4096

// Log is one handler's event log. It is safe for concurrent use; a
// request costs one short critical section (no I/O under the lock).
type Log struct {
	mu      sync.Mutex
	bounds  Bounds
	line    *succession.Line[Bounds] // the registrations of the configs using the log
	events  []*Event                 // oldest first, from head
	head    int
	bytes   int64
	byID    map[string]*Event // action ids of the tracked events
	seq     uint64            // last sequence number given (events and rows)
	rej     rejections
	series  series
	journal [journalSize]*Event
	version uint64 // changes journaled so far
	subs    map[*Subscription]struct{}
	store   *store // nil without a directory
	dirty   map[*Event]struct{}
	deleted []uint64
	onError func(error)
	// early holds updates of actions not accepted yet (early.go).
	early    earlyUpdates
	closed   bool
	stopOnce sync.Once
}

// Options are a log's construction settings.
type Options struct {
	// Dir, when set, keeps the events in Dir/events.db (bbolt) as well,
	// so that they survive a restart.
	Dir string
	// OnError reports problems of the directory (it must not block).
	OnError func(error)
}

// New returns a log with bounds b (until a registration sets others),
// loading what Dir holds.
func New(b Bounds, o Options) (*Log, error) {
	l := &Log{bounds: b.withDefaults(), byID: map[string]*Event{}, subs: map[*Subscription]struct{}{}, onError: o.OnError}
	l.line = succession.New(l.apply, nil)
	if l.onError == nil {
		l.onError = func(error) {}
	}
	if o.Dir != "" {
		st, loaded, err := openStore(o.Dir, l.bounds, time.Now(), l.onError)
		if err != nil {
			return nil, err
		}
		l.store = st
		l.dirty = map[*Event]struct{}{}
		// numbered above every key of the file, unread ones too
		l.seq = st.maxSeq
		for _, e := range loaded { // oldest first
			l.insert(e)
			l.seq = max(l.seq, e.Seq)
		}
		l.trim(time.Now())
		go l.writeLoop()
	}
	return l, nil
}

// Newer counts, by version, the events of the log's file that a newer
// release wrote, found when it was opened: kept in the file unread.
func (l *Log) Newer() map[int]int {
	if l.store == nil {
		return nil
	}
	out := make(map[int]int, len(l.store.newer))
	maps.Copy(out, l.store.newer)
	return out
}

// Registration is one config's claim on a shared log: the oldest
// registration's bounds apply, so that a config that never runs (a
// refused reload) changes nothing, and the next one's take over when the
// running config goes (Release).
type Registration = succession.Registration[Bounds]

// Register adds bounds b as the newest registration.
func (l *Log) Register(b Bounds) *Registration {
	return l.line.Register(b.withDefaults(), nil)
}

// apply sets the bounds and trims to them.
func (l *Log) apply(b Bounds) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bounds = b
	l.trim(time.Now())
	l.trimRows(time.Now().UnixNano())
}

// Bounds returns the bounds in force.
func (l *Log) Bounds() Bounds {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bounds
}

// Accept records an accepted event (Seq is set here), answered at
// e.Time + e.Latency. The log owns e from now on.
func (l *Log) Accept(e *Event) {
	l.series.observe(e.Time.Add(e.Latency), seriesAccepted, e.Latency)
	l.add(e)
}

// Operator records an operator's action (e.Action set; Seq is set here),
// in the list and the live tail but not in the rates. The log owns e
// from now on.
func (l *Log) Operator(e *Event) {
	if e.Action == "" {
		return
	}
	l.add(e)
}

// add inserts e, journals it and trims.
func (l *Log) add(e *Event) {
	now := e.Time.Add(e.Latency)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.seq++
	e.Seq = l.seq
	if !l.early.empty() {
		for i := range e.Dispatch {
			for _, u := range l.early.take(e.Dispatch[i].ID) {
				u.apply(&e.Dispatch[i])
			}
		}
	}
	l.insert(e)
	l.changed(e)
	l.trim(now)
}

// insert adds e at the end; l.mu is held.
func (l *Log) insert(e *Event) {
	e.size = e.accountedSize()
	l.events = append(l.events, e)
	l.bytes += e.size
	if !e.Tracked {
		return
	}
	l.byID[e.ID] = e
	for i := range e.Dispatch {
		if id := e.Dispatch[i].ID; id != "" {
			l.byID[id] = e
		}
	}
}

// find returns the event with the id (or an action id): tracked ones
// through the index, the others by a scan, newest first; l.mu is held.
func (l *Log) find(id string) *Event {
	if e := l.byID[id]; e != nil {
		return e
	}
	for i := len(l.events) - 1; i >= l.head; i-- {
		e := l.events[i]
		if e.ID == id {
			return e
		}
		for j := range e.Dispatch {
			if e.Dispatch[j].ID == id {
				return e
			}
		}
	}
	return nil
}

// changed journals a change of e, marks it for the directory and wakes
// the live tails; l.mu is held.
func (l *Log) changed(e *Event) {
	if old := &l.journal[e.changed%journalSize]; e.changed != 0 && *old == e {
		*old = nil // one slot per event: the journal keeps no evicted event alive
	}
	l.version++
	e.changed = l.version
	l.journal[l.version%journalSize] = e
	if l.dirty != nil {
		l.dirty[e] = struct{}{}
	}
	for s := range l.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// trim evicts the oldest events past the bounds; l.mu is held.
func (l *Log) trim(now time.Time) {
	oldest := now.Add(-l.bounds.Retain)
	for l.head < len(l.events) {
		e := l.events[l.head]
		n := len(l.events) - l.head
		if n <= l.bounds.MaxEvents && l.bytes <= l.bounds.MaxBytes && !e.Time.Before(oldest) {
			break
		}
		l.evict(e)
		l.events[l.head] = nil
		l.head++
	}
	if l.head > 1024 && l.head*2 > len(l.events) {
		l.events = append([]*Event(nil), l.events[l.head:]...)
		l.head = 0
	}
}

// evict forgets e; l.mu is held.
func (l *Log) evict(e *Event) {
	if slot := &l.journal[e.changed%journalSize]; e.changed != 0 && *slot == e {
		*slot = nil
	}
	l.bytes -= e.size
	e.evicted = true
	if l.byID[e.ID] == e {
		delete(l.byID, e.ID)
	}
	for i := range e.Dispatch {
		if id := e.Dispatch[i].ID; l.byID[id] == e {
			delete(l.byID, id)
		}
	}
	if l.dirty != nil {
		delete(l.dirty, e)
		l.deleted = append(l.deleted, e.Seq)
	}
}

// Update changes the dispatch of the action id (an event's own id names
// its first action) of a tracked event with f, which reports whether it
// changed anything. It reports false when the log does not hold the
// action (yet: f is kept, within bounds, and applied when it is
// accepted). f must change nothing but d: a kept one is also applied to
// an empty dispatch, to measure what it writes.
func (l *Log) Update(id string, f func(d *Dispatch) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.byID[id]
	if l.closed {
		return false
	}
	if e == nil {
		l.early.add(id, f)
		return false
	}
	i := slices.IndexFunc(e.Dispatch, func(d Dispatch) bool { return d.ID == id })
	if i < 0 {
		if e.ID != id || len(e.Dispatch) == 0 {
			return false
		}
		i = 0
	}
	d := e.Dispatch[i]
	if !f(&d) {
		return true
	}
	// copy on write: views taken earlier keep theirs
	ds := slices.Clone(e.Dispatch)
	ds[i] = d
	e.Dispatch = ds
	size := e.accountedSize()
	l.bytes += size - e.size
	e.size = size
	l.changed(e)
	return true
}

// Get returns the detail of the event (or action) id and what the caller
// stored to replay it (nil when not kept).
func (l *Log) Get(id string) (EventJSON, []byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.find(id)
	if e == nil {
		return EventJSON{}, nil, false
	}
	return e.view(true), e.Replay, true
}

// Page is one page of a list: the entries (EventJSON or RejectionJSON),
// newest first, and the cursor of the next page ("" at the end).
type Page struct {
	Entries []any  `json:"entries"`
	Next    string `json:"next,omitempty"`
	// Bounds and totals, for the console.
	Events     int   `json:"events"`
	Bytes      int64 `json:"bytes"`
	Rejections int   `json:"rejection_rows"`
	MaxEvents  int   `json:"max_events"`
	MaxBytes   int64 `json:"max_bytes"`
}

// List returns the entries f selects, newest first: the accepted events
// and the rejection rows interleaved in the log's order.
func (l *Log) List(f Filter) Page {
	if f.Limit <= 0 || f.Limit > MaxLimit {
		f.Limit = DefaultLimit
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Page{Entries: make([]any, 0, min(f.Limit, 64)), Events: len(l.events) - l.head, Bytes: l.bytes,
		Rejections: len(l.rej.rows), MaxEvents: l.bounds.MaxEvents, MaxBytes: l.bounds.MaxBytes}
	ei, ri := len(l.events)-1, len(l.rej.order)-1
	var last uint64
	for len(p.Entries) < f.Limit {
		var e *Event
		var r *row
		if ei >= l.head {
			e = l.events[ei]
		}
		if ri >= l.rej.head {
			r = l.rej.order[ri]
		}
		switch {
		case e == nil && r == nil:
			return p
		case r == nil || e != nil && e.Seq > r.seq:
			ei--
			if f.matchEvent(e) {
				p.Entries = append(p.Entries, e.view(false))
				last = e.Seq
			}
		default:
			ri--
			if f.matchRow(r) {
				p.Entries = append(p.Entries, r.view())
				last = r.seq
			}
		}
	}
	if ei >= l.head || ri >= l.rej.head {
		p.Next = cursorOf(time.Time{}, last)
	}
	return p
}

// Rates returns the last hour's rates.
func (l *Log) Rates(now time.Time) RatesJSON { return l.series.snapshot(now) }

// NoRates is the rates of a log that counted nothing.
func NoRates(now time.Time) RatesJSON {
	var s series
	return s.snapshot(now)
}

// Subscription follows a log's changes for a live tail.
type Subscription struct {
	l       *Log
	wake    chan struct{}
	version uint64 // last event change delivered
	rows    uint64 // row version at the last row scan
}

// Subscribe starts following the changes made from now on.
func (l *Log) Subscribe() *Subscription {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &Subscription{l: l, wake: make(chan struct{}, 1), version: l.version, rows: l.rej.version}
	l.subs[s] = struct{}{}
	return s
}

// Resume is Subscribe from a cursor of the stream (a Last-Event-ID):
// the changes after it follow, if the journal still holds them.
func (l *Log) Resume(version uint64) *Subscription {
	s := l.Subscribe()
	if version < s.version {
		s.version = version
	}
	return s
}

// Close stops following.
func (s *Subscription) Close() {
	s.l.mu.Lock()
	delete(s.l.subs, s)
	s.l.mu.Unlock()
}

// Changed is signalled (at most one signal pending) when an event
// changes: for a caller that waits on other things too.
func (s *Subscription) Changed() <-chan struct{} { return s.wake }

// Wait blocks until an event changes, d passes or ctx ends (false).
func (s *Subscription) Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.wake:
	case <-t.C:
	}
	return true
}

// Changes are what a live tail sends next: the events accepted or changed
// since the last call (each once, in the order of their last change), the
// rows counted since the last row scan (when rows is true), and Lost when
// the tail fell more than the journal behind (some changes are missing).
type Changes struct {
	Events  []EventJSON
	Rows    []RejectionJSON
	Lost    bool
	Version uint64 // the cursor of the last event change included
	Skipped int    // NextAtMost: changed events and rows past its bound, left out
}

// Next returns the changes f selects.
func (s *Subscription) Next(f Filter, rows bool) Changes { return s.NextAtMost(f, rows, -1) }

// NextAtMost is Next with at most max events (the newest changes; < 0:
// no bound): the others are counted in Skipped, their views never made,
// so that a tail bounded in rate costs the log's lock no more than its
// bound however many events change.
func (s *Subscription) NextAtMost(f Filter, rows bool, max int) Changes {
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	var c Changes
	from := s.version + 1
	if l.version >= journalSize && from <= l.version-journalSize {
		c.Lost = true
		from = l.version - journalSize + 1
	}
	for v := l.version; v >= from && v > 0; v-- { // newest first, reversed below
		e := l.journal[v%journalSize]
		if e == nil || e.changed != v { // changed again later: sent then
			continue
		}
		if e.evicted || !f.matchEvent(e) {
			continue
		}
		if max >= 0 && len(c.Events) >= max {
			c.Skipped++
			continue
		}
		c.Events = append(c.Events, e.view(false))
	}
	slices.Reverse(c.Events)
	s.version = l.version
	c.Version = l.version
	if rows && l.rej.version != s.rows {
		for i := len(l.rej.order) - 1; i >= l.rej.head; i-- {
			r := l.rej.order[i]
			if r.changed <= s.rows || !f.matchRow(r) {
				continue
			}
			if max >= 0 && len(c.Events)+len(c.Rows) >= max {
				c.Skipped++
				continue
			}
			c.Rows = append(c.Rows, r.view())
		}
		s.rows = l.rej.version
	}
	return c
}

// Destruct stops the directory writer (after a last write) and closes it;
// the usage pool calls it when the last config using the log is gone.
func (l *Log) Destruct() error {
	var err error
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		if l.store != nil {
			close(l.store.stop)
			<-l.store.done
			err = l.store.close()
		}
	})
	return err
}

// Subscribers counts the live tails following the log.
func (l *Log) Subscribers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.subs)
}
