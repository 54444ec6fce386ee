package spool

import (
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// DeadLetters returns the dead-lettered events in acceptance order, each with
// its Seq and LastError; events being dead-lettered concurrently are
// included. Unreadable records are skipped and logged.
func (s *Store) DeadLetters() ([]*Event, error) {
	var out []*Event
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(deadBucket).ForEach(func(k, v []byte) error {
			ev, err := decodeEvent(v)
			if errors.Is(err, ErrNewer) {
				return nil // kept for the release that wrote it (see Newer)
			}
			if err != nil || len(k) != keyLen {
				s.log.Error("spool: skipping unreadable dead letter", zap.Binary("key", k), zap.Error(err))
				return nil
			}
			ev.Seq = keySeq(k)
			out = append(out, ev)
			return nil
		})
	})
	return out, err
}

// Retry moves the dead letters whose ID is in ids (all when ids is empty)
// back to the queue, behind everything queued, with attempts, next try and
// last error reset and FirstSeen set to now so MaxAge counts afresh. It
// returns how many events moved; unknown ids are ignored.
func (s *Store) Retry(ids ...string) (int, error) {
	now := time.Now()
	var items []*item
	var delta int64
	err := s.update(func(tx *bolt.Tx) error {
		items, delta = items[:0], 0
		q, d := tx.Bucket(queueBucket), tx.Bucket(deadBucket)
		matches, err := matchDead(d, ids)
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := d.Delete(m.key); err != nil {
				return err
			}
			seq, err := q.NextSequence()
			if err != nil {
				return err
			}
			ev := m.ev
			ev.Attempts, ev.NextTry, ev.LastError, ev.FirstSeen = 0, time.Time{}, "", now
			val := encodeEvent(ev)
			if err := q.Put(seqKey(seq), val); err != nil {
				return err
			}
			delta += recordSize(val) - m.size
			items = append(items, &item{seq: seq, size: recordSize(val), firstSeen: now, wake: ev.isWake()})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var wake, agent bool
	s.mu.Lock()
	for _, it := range items {
		s.idx.insert(it)
		wake, agent = wake || it.wake, agent || !it.wake
	}
	s.deadDepth -= len(items)
	s.bytes += delta
	s.mu.Unlock()
	if wake {
		nudge(s.wakeSig)
	}
	if agent {
		nudge(s.agentSig)
	}
	return len(items), nil
}

// Drop deletes the dead letters whose ID is in ids (all when ids is empty)
// and returns how many were deleted; unknown ids are ignored.
func (s *Store) Drop(ids ...string) (int, error) {
	var n int
	var freed int64
	err := s.update(func(tx *bolt.Tx) error {
		n, freed = 0, 0
		d := tx.Bucket(deadBucket)
		matches, err := matchDead(d, ids)
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := d.Delete(m.key); err != nil {
				return err
			}
			n++
			freed += m.size
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.deadDepth -= n
	s.bytes -= freed
	s.mu.Unlock()
	return n, nil
}

// deadMatch is one dead letter selected by matchDead.
type deadMatch struct {
	key  []byte
	ev   *Event
	size int64
}

// matchDead collects the readable dead letters whose ID is in ids (all when
// empty). Keys are copied so the caller may modify the bucket afterwards.
func matchDead(d *bolt.Bucket, ids []string) ([]deadMatch, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []deadMatch
	err := d.ForEach(func(k, v []byte) error {
		ev, err := decodeEvent(v)
		if err != nil {
			return nil // left in place; DeadLetters reports it
		}
		if len(ids) == 0 || want[ev.ID] {
			out = append(out, deadMatch{key: append([]byte(nil), k...), ev: ev, size: recordSize(v)})
		}
		return nil
	})
	return out, err
}

// view runs fn in a read transaction, after pending commits, unless the
// store is closed.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	if err := s.flush(); err != nil {
		return err
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

// update runs fn in its own write transaction, after pending commits,
// unless the store is closed.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if err := s.flush(); err != nil {
		return err
	}
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.Update(fn)
}
