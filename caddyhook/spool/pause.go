package spool

import (
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// An operator's pause holds deliveries, and the time an event spends held
// does not count toward MaxAge: pausing for maintenance never expires what
// the pause holds. The store keeps the pauses that may still matter (those
// that end after the oldest queued event was accepted) in its file, so that
// this holds across a restart too; a pause itself ends with the process.

// metaBucket holds the store's own records; pausesKey the pause spans.
// The key is the record's version: a later format goes under another
// key (an older release then neither reads nor overwrites it).
var (
	metaBucket = []byte("meta")
	pausesKey  = []byte("pauses")
)

// maxPauseSpans bounds the spans kept: beyond it the two oldest are
// merged into one (which can only keep an event longer, never expire it
// sooner).
const maxPauseSpans = 256

// pauseSpan is one operator pause, from start to end (end zero: still
// paused).
type pauseSpan struct {
	start, end time.Time
}

// PauseLog records an operator's pauses so that the time an event spends
// held by one does not count toward its max_age. It is not safe for
// concurrent use: its owner guards it (the Store with its mutex, the
// cluster queue's delivery target with its own).
type PauseLog struct {
	spans []pauseSpan // oldest first; the last one may still be open
}

// Set starts (paused) or ends a pause at now; it reports whether that
// changed anything.
func (l *PauseLog) Set(paused bool, now time.Time) bool {
	n := len(l.spans)
	open := n > 0 && l.spans[n-1].end.IsZero()
	switch {
	case paused == open:
		return false
	case paused:
		l.spans = append(l.spans, pauseSpan{start: now})
	default:
		l.spans[n-1].end = now
	}
	return true
}

// HeldSince is how long deliveries were paused between from and now: the
// part of max_age an event accepted at from does not spend.
func (l *PauseLog) HeldSince(from, now time.Time) time.Duration {
	var held time.Duration
	for _, p := range l.spans {
		start, end := p.start, p.end
		if end.IsZero() || end.After(now) {
			end = now
		}
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			held += end.Sub(start)
		}
	}
	return held
}

// Prune drops the spans that ended before oldest (no event that may still
// be delivered was accepted then) and merges the oldest beyond
// maxPauseSpans (which can only keep an event longer, never expire it
// sooner).
func (l *PauseLog) Prune(oldest time.Time) {
	kept := l.spans[:0]
	for _, p := range l.spans {
		if p.end.IsZero() || p.end.After(oldest) {
			kept = append(kept, p)
		}
	}
	for len(kept) > maxPauseSpans {
		kept[1].start = kept[0].start
		kept = kept[1:]
	}
	l.spans = kept
}

// expiry is when an item accepted at firstSeen expires, pauses so far not
// counted. Called with s.mu held.
func (s *Store) expiry(firstSeen, now time.Time) time.Time {
	return firstSeen.Add(s.cfg.MaxAge + s.pauses.HeldSince(firstSeen, now))
}

// setPaused switches delivery off or on, recording the pause in the file.
func (s *Store) setPaused(paused bool) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	now := time.Now()
	s.mu.Lock()
	changed := s.paused != paused
	s.paused = paused
	if changed {
		s.pauses.Set(paused, now)
		s.prunePauses()
	}
	rec := encodePauses(s.pauses.spans)
	s.mu.Unlock()
	if changed {
		if err := s.db.Update(func(tx *bolt.Tx) error { return putPauses(tx, rec) }); err != nil {
			// delivery is paused or resumed all the same; only a restart
			// would count this pause toward max_age
			s.log.Error("spool: recording the pause failed", zap.Error(err))
		}
	}
	switch {
	case changed && paused:
		s.log.Info("spool: delivery paused", zap.String("path", s.path))
	case changed:
		s.log.Info("spool: delivery resumed", zap.String("path", s.path))
	}
	if !paused {
		nudge(s.wakeSig)
		nudge(s.agentSig)
	}
	return nil
}

// prunePauses prunes the pauses to those that end after the oldest
// queued event was accepted. Called with s.mu held.
func (s *Store) prunePauses() {
	oldest := time.Now()
	if it := s.idx.oldest(); it != nil {
		oldest = it.firstSeen
	}
	s.pauses.Prune(oldest)
}

// endPauseAtClose ends a pause that is still on when the store closes (a
// pause ends with the process): the next start counts it up to now.
// Called before the committer stops.
func (s *Store) endPauseAtClose() {
	s.mu.Lock()
	if !s.pauses.Set(false, time.Now()) {
		s.mu.Unlock()
		return
	}
	rec := encodePauses(s.pauses.spans)
	s.mu.Unlock()
	if err := s.db.Update(func(tx *bolt.Tx) error { return putPauses(tx, rec) }); err != nil {
		s.log.Error("spool: recording the end of the pause failed", zap.Error(err))
	}
}

// loadPauses reads the recorded spans, in open's write transaction; one
// still open (the process ended without closing the store) ends now, and
// is recorded so.
func (s *Store) loadPauses(tx *bolt.Tx) error {
	b := tx.Bucket(metaBucket)
	if b == nil {
		return nil
	}
	spans, err := decodePauses(b.Get(pausesKey))
	if err != nil {
		s.log.Error("spool: the recorded pauses are unreadable; pauses before this start count toward max_age", zap.Error(err))
		return nil
	}
	now, open := time.Now(), false
	for i := range spans {
		if spans[i].end.IsZero() {
			spans[i].end, open = now, true
		}
	}
	s.pauses.spans = spans
	if !open {
		return nil
	}
	return b.Put(pausesKey, encodePauses(spans))
}

// putPauses stores the encoded spans.
func putPauses(tx *bolt.Tx, rec []byte) error {
	b, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return err
	}
	return b.Put(pausesKey, rec)
}

// encodePauses writes count, then each span's start and end as varint
// Unix nanoseconds (end 0: still paused).
func encodePauses(spans []pauseSpan) []byte {
	b := binary.AppendUvarint(nil, uint64(len(spans)))
	for _, p := range spans {
		b = binary.AppendVarint(b, timeToNanos(p.start))
		b = binary.AppendVarint(b, timeToNanos(p.end))
	}
	return b
}

// errPauses marks an unreadable pause record.
var errPauses = errors.New("malformed pause record")

// decodePauses reads what encodePauses wrote (nil: none).
func decodePauses(b []byte) ([]pauseSpan, error) {
	if b == nil {
		return nil, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxPauseSpans+1 {
		return nil, errPauses
	}
	b = b[k:]
	spans := make([]pauseSpan, 0, n)
	for range n {
		start, k1 := binary.Varint(b)
		if k1 <= 0 {
			return nil, errPauses
		}
		end, k2 := binary.Varint(b[k1:])
		if k2 <= 0 {
			return nil, errPauses
		}
		b = b[k1+k2:]
		spans = append(spans, pauseSpan{start: nanosToTime(start), end: nanosToTime(end)})
	}
	if len(b) != 0 {
		return nil, errPauses
	}
	return spans, nil
}
