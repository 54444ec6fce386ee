package eventlog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/caddyhook/caddyhook/internal/safefile"
)

// storeFile is the events file in a log's directory.
const storeFile = "events.db"

// flushEvery is how often the changes go to the directory: an event is
// on disk at most this long after it was answered (a log, not the spool:
// a crash may lose the last moment's entries, never the file).
const flushEvery = 500 * time.Millisecond

var bucketEvents = []byte("events")

// store is a log's directory: events by sequence number (big-endian), as
// JSON.
type store struct {
	db   *bolt.DB
	stop chan struct{}
	done chan struct{}
	// newer counts the events a newer release wrote, by version: kept in
	// the file unread (see openStore)
	newer map[int]int
	// maxSeq is the highest key in the file, kept events included: the
	// log numbers new events above it, so that none overwrites them
	maxSeq uint64
}

// RecordVersion is the newest version of the rows this build writes (the
// "v" of each; one without is version 0, written before v0.9.0, and read
// as version 1): an event is written as version 1, an operator's action
// (which earlier releases do not know) as version 2, so that an earlier
// release keeps it unread. A row of a later version is kept in the file
// unread.
const RecordVersion = 2

// eventVersion is the version of a row that is an event.
const eventVersion = 1

// storedEvent is an event as the file holds it.
type storedEvent struct {
	V          int           `json:"v"`
	Seq        uint64        `json:"seq"`
	ID         string        `json:"id"`
	Time       time.Time     `json:"time"`
	Path       string        `json:"path"`
	Hook       string        `json:"hook"`
	Route      string        `json:"route,omitempty"`
	Mapping    string        `json:"mapping,omitempty"`
	Client     string        `json:"client,omitempty"`
	ClientBits int           `json:"client_bits,omitempty"`
	Auth       string        `json:"auth"`
	Status     int           `json:"status"`
	Reason     string        `json:"reason,omitempty"`
	Latency    time.Duration `json:"latency"`
	IdemKey    string        `json:"idem_key,omitempty"`
	ReplayOf   string        `json:"replay_of,omitempty"`
	Headers    []Header      `json:"headers,omitempty"`
	Body       []byte        `json:"body,omitempty"`
	BodyBytes  int           `json:"body_bytes"`
	BodyNote   string        `json:"body_note,omitempty"`
	Replay     []byte        `json:"replay,omitempty"`
	ReplayNote string        `json:"replay_note,omitempty"`
	Dispatch   []Dispatch    `json:"dispatch,omitempty"`
	HasBody    bool          `json:"has_body,omitempty"`
	Tracked    bool          `json:"tracked,omitempty"`
	// version 2: an operator's action
	Action   string `json:"action,omitempty"`
	Operator string `json:"operator,omitempty"`
	Target   string `json:"target,omitempty"`
}

// stored converts e (a snapshot taken under the lock).
func stored(e *Event) storedEvent {
	s := storedEvent{V: eventVersion, Seq: e.Seq, ID: e.ID, Time: e.Time, Path: e.Path, Hook: e.Hook, Route: e.Route, Mapping: e.Mapping,
		ClientBits: e.ClientBits, Auth: e.Auth, Status: e.Status, Reason: e.Reason, Latency: e.Latency, IdemKey: e.IdemKey,
		ReplayOf: e.ReplayOf, Headers: e.Headers, Body: e.Body, BodyBytes: e.BodyBytes, BodyNote: e.BodyNote,
		Replay: e.Replay, ReplayNote: e.ReplayNote, Dispatch: e.Dispatch, HasBody: e.Body != nil, Tracked: e.Tracked,
		Action: e.Action, Operator: e.Operator, Target: e.Target}
	if e.Action != "" {
		s.V = RecordVersion
	}
	if e.Client.IsValid() {
		s.Client = e.Client.String()
	}
	return s
}

// event converts back.
func (s *storedEvent) event() *Event {
	e := &Event{Seq: s.Seq, ID: s.ID, Time: s.Time, Path: s.Path, Hook: s.Hook, Route: s.Route, Mapping: s.Mapping,
		ClientBits: s.ClientBits, Auth: s.Auth, Status: s.Status, Reason: s.Reason, Latency: s.Latency, IdemKey: s.IdemKey,
		ReplayOf: s.ReplayOf, Headers: s.Headers, Body: s.Body, BodyBytes: s.BodyBytes, BodyNote: s.BodyNote,
		Replay: s.Replay, ReplayNote: s.ReplayNote, Dispatch: s.Dispatch, Tracked: s.Tracked,
		Action: s.Action, Operator: s.Operator, Target: s.Target}
	if s.HasBody && e.Body == nil {
		e.Body = []byte{}
	}
	e.Client, _ = netip.ParseAddr(s.Client)
	return e
}

// seqKey is the file key of a sequence number.
func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// openStore opens (or creates) dir/events.db and returns the events it
// holds within b and the retention, oldest first; the others are deleted,
// except those a newer release wrote (a version above RecordVersion),
// which stay in the file unread, for that release (a rollback loses
// nothing), and are counted in the store's newer. A file bbolt cannot
// open is moved aside (reported through onError) and a fresh one made; a
// file another process holds is an error.
func openStore(dir string, b Bounds, now time.Time, onError func(error)) (*store, []*Event, error) {
	// checked as the spool's: never opened through a symbolic link, nor
	// in a directory anyone may write to
	path, err := safefile.Prepare(dir, storeFile)
	if err != nil {
		return nil, nil, fmt.Errorf("events: dir: %w", err)
	}
	opts := &bolt.Options{Timeout: time.Second, NoFreelistSync: true, OpenFile: safefile.OpenNoFollow}
	db, err := bolt.Open(path, 0o600, opts)
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, nil, fmt.Errorf("events: dir: %s is in use by another hooks handler or process", path)
	case err != nil:
		aside := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, nil, fmt.Errorf("events: dir: %s: %v (and moving it aside: %v)", path, err, rerr)
		}
		onError(fmt.Errorf("events: %s could not be opened (%v); moved to %s, starting empty", path, err, aside))
		if db, err = bolt.Open(path, 0o600, opts); err != nil {
			return nil, nil, fmt.Errorf("events: dir: %w", err)
		}
	}
	var loaded []*Event
	var stale [][]byte
	st := &store{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketEvents)
		if err != nil {
			return err
		}
		oldest := now.Add(-b.Retain)
		var bytes int64
		c := bk.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if len(k) == 8 {
				st.maxSeq = max(st.maxSeq, binary.BigEndian.Uint64(k))
			}
			var s storedEvent
			if json.Unmarshal(v, &s) != nil {
				stale = append(stale, append([]byte(nil), k...))
				continue
			}
			if s.V > RecordVersion {
				if st.newer == nil {
					st.newer = map[int]int{}
				}
				st.newer[s.V]++
				continue
			}
			e := s.event()
			size := e.accountedSize()
			if len(loaded) >= b.MaxEvents || bytes+size > b.MaxBytes || e.Time.Before(oldest) {
				stale = append(stale, append([]byte(nil), k...))
				continue
			}
			bytes += size
			loaded = append(loaded, e)
		}
		for _, k := range stale {
			if err := bk.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("events: dir: reading %s: %w", path, err)
	}
	for i, j := 0, len(loaded)-1; i < j; i, j = i+1, j-1 {
		loaded[i], loaded[j] = loaded[j], loaded[i]
	}
	return st, loaded, nil
}

// close closes the file.
func (s *store) close() error { return s.db.Close() }

// writeLoop writes the changes every flushEvery, and once more on stop.
func (l *Log) writeLoop() {
	st := l.store
	defer close(st.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			l.flush()
			return
		case <-t.C:
			l.mu.Lock()
			l.trim(time.Now())
			l.mu.Unlock()
			l.flush()
		}
	}
}

// flush writes the changed events and deletes the evicted ones; the
// encoding and the write happen outside the lock.
func (l *Log) flush() {
	l.mu.Lock()
	if len(l.dirty) == 0 && len(l.deleted) == 0 {
		l.mu.Unlock()
		return
	}
	snaps := make([]storedEvent, 0, len(l.dirty))
	for e := range l.dirty {
		snaps = append(snaps, stored(e)) // Dispatch is copied on write: safe to share
	}
	clear(l.dirty)
	deleted := l.deleted
	l.deleted = nil
	l.mu.Unlock()

	err := l.store.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketEvents)
		for i := range snaps {
			v, err := json.Marshal(&snaps[i])
			if err != nil {
				return err
			}
			if err := bk.Put(seqKey(snaps[i].Seq), v); err != nil {
				return err
			}
		}
		for _, seq := range deleted {
			if err := bk.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		l.onError(fmt.Errorf("events: writing the directory: %w", err))
	}
}
