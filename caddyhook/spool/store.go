package spool

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/safefile"
)

// Store is a durable event queue in <dir>/spool.db with its delivery
// workers. It is safe for concurrent use. One process may have a given
// directory open at a time (bbolt's file lock); within a process, share one
// Store per directory (it implements caddy.Destructor for caddy.UsagePool).
type Store struct {
	cfg  Config
	log  *zap.Logger
	db   *bolt.DB
	path string
	rnd  func() float64 // backoff jitter source
	// whySeed hashes an attempt's reason for Store.identical
	whySeed maphash.Seed

	ops           chan op
	committerDone chan struct{}
	closeMu       sync.RWMutex // guards closed against submitters
	closed        bool
	closeOnce     sync.Once
	closeErr      error

	mu          sync.Mutex // guards everything below
	idx         *index
	bytes       int64
	deadDepth   int
	inFlight    int
	pauseUntil  time.Time // no new sends before this (gateway unreachable)
	netFailures int       // consecutive sends that got no response
	started     bool
	agentActive int         // agent-lane workers running (Reconfigure changes the target)
	paused      bool        // by the operator (Pause/Resume)
	pauses      PauseLog    // the operator's pauses that may still matter
	sends       sendLog     // the delivery rate limit (SetRate)
	newer       map[int]int // records of a newer release found at open, by version

	sender   atomic.Pointer[senderBox]
	ctx      context.Context // cancelled by Close; in-flight sends see it
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	wakeSig  chan struct{}
	agentSig chan struct{}

	appended, commits, delivered, retries, deadLetters atomic.Uint64
}

// Open opens (creating) <dir>/spool.db and indexes the queued events. A file
// lock held by another process yields ErrLocked after cfg.LockTimeout. The
// file is checked before bbolt maps it: a damaged one yields a
// *CorruptError (errors.Is ErrCorrupt) and is left untouched (Recover
// moves it aside and salvages it); one damaged meta page is repaired from
// the other. Delivery starts with the first SetSender.
func Open(cfg Config, logger *zap.Logger) (*Store, error) {
	return open(cfg, logger, openOptions{})
}

// openOptions adjust open: tune changes the bbolt options (tests use it to
// simulate a full disk), seed is written into a fresh file before the
// index is built (Recover's salvage).
type openOptions struct {
	tune func(*bolt.Options)
	seed []salvaged
}

// open is Open with options.
func open(cfg Config, logger *zap.Logger, o openOptions) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = zap.NewNop()
	}
	path, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	lk, in, err := lockAndInspect(path, cfg.LockTimeout)
	if err != nil {
		return nil, err
	}
	lk.release()
	if in.problem != nil {
		return nil, &CorruptError{Path: path, Reason: in.problem}
	}
	for _, page := range in.repaired {
		logger.Warn("spool: a meta page of the spool file is damaged; using the other copy, which holds every acknowledged event, and rewriting it",
			zap.String("path", path), zap.Int("meta_page", page))
	}
	opts := &bolt.Options{
		Timeout:         cfg.LockTimeout,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: initialMmapSize(),
		OpenFile:        safefile.OpenNoFollow,
	}
	if o.tune != nil {
		o.tune(opts)
	}
	db, err := bolt.Open(path, 0o600, opts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("spool: opening %s: %w", path, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		cfg:           cfg,
		log:           logger,
		db:            db,
		path:          path,
		rnd:           jitter,
		whySeed:       maphash.MakeSeed(),
		ops:           make(chan op, opQueueLen),
		committerDone: make(chan struct{}),
		idx:           newIndex(),
		ctx:           ctx,
		cancel:        cancel,
		wakeSig:       make(chan struct{}, 1),
		agentSig:      make(chan struct{}, 1),
	}
	err = guarded(path, func() error {
		if err := s.seed(o.seed); err != nil {
			return err
		}
		if err := s.load(); err != nil {
			return err
		}
		return s.mirrorMeta()
	})
	if err != nil {
		cancel()
		_ = db.Close()
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("spool: loading %s: %w", path, err)
	}
	go s.commitLoop()
	return s, nil
}

// initialMmapSize reserves address space up front so the file can grow
// without bbolt remapping it (a remap stalls every writer and waits for
// readers): 1 GiB on 64-bit Unix, where the reservation costs nothing. On
// Windows bbolt would grow the file itself to this size, and 32-bit
// platforms lack the address space, so there it stays 0 (grow on demand).
func initialMmapSize() int {
	if runtime.GOOS == "windows" || strconv.IntSize == 32 {
		return 0
	}
	return 1 << 30
}

// createBuckets returns the store's buckets, creating them in a new file.
func createBuckets(tx *bolt.Tx) (buckets, error) {
	q, err := tx.CreateBucketIfNotExists(queueBucket)
	if err != nil {
		return buckets{}, err
	}
	d, err := tx.CreateBucketIfNotExists(deadBucket)
	return buckets{queue: q, dead: d}, err
}

// load creates the buckets and rebuilds the in-memory index and byte count.
func (s *Store) load() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := createBuckets(tx)
		if err != nil {
			return err
		}
		q, d := b.queue, b.dead
		err = q.ForEach(func(k, v []byte) error {
			s.bytes += recordSize(v)
			r, err := parseRecord(v)
			if err == nil && len(k) != keyLen {
				err = fmt.Errorf("%w: key of %d bytes", errCorrupt, len(k))
			}
			if s.keepNewer(err) {
				return nil
			}
			if err != nil {
				s.log.Error("spool: skipping unreadable queued record", zap.Binary("key", k), zap.Error(err))
				return nil
			}
			s.idx.insert(&item{
				seq:       keySeq(k),
				size:      recordSize(v),
				firstSeen: r.firstSeen,
				nextTry:   r.nextTry,
				attempts:  r.attempts,
				wake:      string(r.kind) == KindWake,
			})
			return nil
		})
		if err != nil {
			return err
		}
		err = d.ForEach(func(_, v []byte) error {
			s.bytes += recordSize(v)
			if _, err := parseRecord(v); s.keepNewer(err) {
				return nil
			}
			s.deadDepth++
			return nil
		})
		if err != nil {
			return err
		}
		for v, n := range s.newer {
			s.log.Warn("spool: keeping records written by a newer release, unread: they stay in spool.db for that release "+
				"(not delivered, not listed, never deleted)", zap.String("path", s.path), zap.Int("version", v), zap.Int("records", n))
		}
		return s.loadPauses(tx)
	})
}

// keepNewer counts a record that a newer release wrote (err is a
// *NewerError) and reports whether it was one.
func (s *Store) keepNewer(err error) bool {
	v, ok := NewerVersion(err)
	if !ok {
		return false
	}
	if s.newer == nil {
		s.newer = map[int]int{}
	}
	s.newer[v]++
	return true
}

// Newer counts, by format version, the records of spool.db that a newer
// release wrote, found when it was opened: left where they are (not
// delivered, not listed, never deleted, though counted against
// MaxBytes), for that release to read after a rollback.
func (s *Store) Newer() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]int, len(s.newer))
	maps.Copy(out, s.newer)
	return out
}

// Path returns the bbolt file's path.
func (s *Store) Path() string { return s.path }

// Config returns the effective configuration (defaults applied).
func (s *Store) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Append durably stores evs (fsync'd, group-committed with concurrent
// callers) before returning, in argument order. It returns ErrFull, storing
// nothing, when the events would make the spool exceed MaxBytes, and any
// write error otherwise (the caller answers 503). A zero FirstSeen is set to
// now; on success each event's Seq is set. ctx bounds only the wait for a
// place in the commit queue (a done ctx stores nothing): once queued, Append
// waits for the commit, so its result always tells whether the events are
// on disk.
func (s *Store) Append(ctx context.Context, evs ...*Event) error {
	if len(evs) == 0 {
		return nil
	}
	now := time.Now()
	o := &appendOp{
		evs:    evs,
		vals:   make([][]byte, len(evs)),
		seqs:   make([]uint64, len(evs)),
		result: make(chan error, 1),
	}
	for i, ev := range evs {
		if err := ev.validate(); err != nil {
			return fmt.Errorf("spool: append event %d: %w", i, err)
		}
		if ev.FirstSeen.IsZero() {
			ev.FirstSeen = now
		}
		o.vals[i] = encodeEvent(ev)
		o.size += recordSize(o.vals[i])
	}
	if err := s.reserve(o.size); err != nil {
		return err
	}
	if err := s.submit(ctx, o); err != nil {
		s.mu.Lock()
		s.bytes -= o.size
		s.mu.Unlock()
		return err
	}
	if err := <-o.result; err != nil {
		return fmt.Errorf("spool: append: %w", err)
	}
	return nil
}

// reserve claims n bytes against MaxBytes or returns ErrFull.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes+n > s.cfg.MaxBytes {
		return ErrFull
	}
	s.bytes += n
	return nil
}

// submit queues o for the committer unless the store is closed or ctx is
// done before o finds room in the queue.
func (s *Store) submit(ctx context.Context, o op) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the workers (an in-flight send is cancelled through its
// context and left queued, to be retried after a restart), commits pending
// bookkeeping and closes the file. Later calls return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.cancel()
		s.mu.Unlock()
		s.workers.Wait()

		s.closeMu.Lock()
		s.closed = true
		close(s.ops)
		s.closeMu.Unlock()
		<-s.committerDone
		s.endPauseAtClose()

		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("spool: closing %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Destruct closes the store; it makes *Store a caddy.Destructor so it can
// live in a caddy.UsagePool across config reloads.
func (s *Store) Destruct() error { return s.Close() }

// Stats is a point-in-time snapshot for metrics and the CLI.
type Stats struct {
	Depth        int           // queued events, in flight included
	InFlight     int           // events being sent now
	Dead         int           // dead letters held
	Bytes        int64         // logical bytes held (queued and dead), as counted against MaxBytes
	MaxBytes     int64         // the configured limit
	MaxAge       time.Duration // the settings in force (Reconfigure changes them)
	RetryInitial time.Duration
	RetryMax     time.Duration
	Workers      int
	MaxIdentical int
	OldestAge    time.Duration // age of the earliest-accepted queued event; 0 when empty
	Appended     uint64        // events stored since open
	Commits      uint64        // write transactions (fsyncs) since open
	Delivered    uint64        // events delivered since open
	Retries      uint64        // failed attempts rescheduled since open
	DeadLetters  uint64        // events dead-lettered since open
	Paused       bool          // delivery paused by the operator
	Delivering   bool          // a sender is installed: this process delivers
	Rate         Rate          // the delivery rate limit in force (zero: none)
}

// Stats returns a snapshot of the store.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		Depth:        s.idx.depth(),
		InFlight:     s.inFlight,
		Dead:         s.deadDepth,
		Bytes:        s.bytes,
		MaxBytes:     s.cfg.MaxBytes,
		MaxAge:       s.cfg.MaxAge,
		RetryInitial: s.cfg.RetryInitial,
		RetryMax:     s.cfg.RetryMax,
		Workers:      s.cfg.Workers,
		MaxIdentical: s.cfg.MaxIdentical,
		Paused:       s.paused,
		Delivering:   s.sender.Load() != nil,
		Rate:         s.sends.rate,
	}
	if it := s.idx.oldest(); it != nil {
		st.OldestAge = max(0, time.Since(it.firstSeen))
	}
	s.mu.Unlock()
	st.Appended = s.appended.Load()
	st.Commits = s.commits.Load()
	st.Delivered = s.delivered.Load()
	st.Retries = s.retries.Load()
	st.DeadLetters = s.deadLetters.Load()
	return st
}
