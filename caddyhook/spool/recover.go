package spool

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// ErrCorrupt is wrapped by Open when spool.db is damaged so that bbolt
// cannot use it safely (a garbage page, a truncated file, both meta pages
// invalid). Open changes nothing then; Recover moves the file aside and
// salvages it.
var ErrCorrupt = errors.New("spool file corrupt")

// CorruptError says which file is damaged and how.
type CorruptError struct {
	Path   string
	Reason error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("spool: %s is corrupt: %v", e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Salvage reports what Recover did with a corrupt file.
type Salvage struct {
	Reason  error  // what was wrong with the file
	MovedTo string // where the damaged file now is, unchanged
	Queued  int    // events restored to the delivery queue
	Dead    int    // dead letters restored
	Skipped int    // records found but unreadable, and damaged pages skipped
}

// inspection is what a check of spool.db found.
type inspection struct {
	file     *boltFile // nil for a new (empty) file
	problem  error     // nil when bbolt can open the file safely
	repaired []int     // meta pages that are invalid while the other is fine
}

// inspect checks the file behind lk without mapping it.
func inspect(lk *fileLock) (inspection, error) {
	st, err := lk.f.Stat()
	if err != nil {
		return inspection{}, err
	}
	if st.Size() == 0 {
		return inspection{}, nil
	}
	f, err := readBoltFile(lk.f, st.Size())
	if err != nil {
		return inspection{problem: err}, nil
	}
	in := inspection{file: f}
	m := f.current()
	in.problem = f.check(m)
	for _, other := range f.metas {
		if other.err != nil {
			in.repaired = append(in.repaired, other.page)
		}
	}
	return in, nil
}

// lockAndInspect takes the file lock on path (waiting up to timeout, like
// bbolt) and checks the file; the caller releases the lock.
func lockAndInspect(path string, timeout time.Duration) (*fileLock, inspection, error) {
	lk, err := lockFile(path, timeout)
	if err != nil {
		return nil, inspection{}, err
	}
	in, err := inspect(lk)
	if err != nil {
		lk.release()
		return nil, inspection{}, fmt.Errorf("spool: checking %s: %w", path, err)
	}
	return lk, in, nil
}

// Recover opens the spool like Open; when the file is corrupt it moves it
// aside as spool.db.corrupt-<UTC time>, starts a fresh spool.db and fills
// it with every event that can still be read from the damaged file (from
// either of its two meta pages' trees; an event found twice is restored
// once). The damaged file is left as it was, for inspection. The Salvage
// is nil when the file was sound.
func Recover(cfg Config, logger *zap.Logger) (*Store, *Salvage, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	cfg = cfg.withDefaults()
	path, err := prepareDir(cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	lk, in, err := lockAndInspect(path, cfg.LockTimeout)
	if err != nil {
		return nil, nil, err
	}
	if in.problem == nil {
		lk.release()
		s, err := open(cfg, logger, openOptions{})
		return s, nil, err
	}
	sv := &Salvage{Reason: in.problem}
	var recs []salvaged
	if in.file != nil {
		recs, sv.Skipped = salvageRecords(in.file)
	}
	sv.MovedTo = path + ".corrupt-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	err = os.Rename(path, sv.MovedTo)
	lk.release()
	if err != nil {
		return nil, nil, fmt.Errorf("spool: moving corrupt %s aside: %w", path, err)
	}
	for _, r := range recs {
		if r.dead {
			sv.Dead++
		} else {
			sv.Queued++
		}
	}
	s, err := open(cfg, logger, openOptions{seed: recs})
	if err != nil {
		return nil, sv, err
	}
	return s, sv, nil
}

// salvaged is one readable record of a damaged file.
type salvaged struct {
	val  []byte
	dead bool
}

// salvageRecords collects the records of the queue and dead buckets from
// the trees of both meta pages, the current one first, keeping one record
// per event id. skipped counts damaged pages and unreadable records.
func salvageRecords(f *boltFile) (recs []salvaged, skipped int) {
	seen := map[string]bool{}
	metas := []boltMeta{f.current()}
	for _, m := range f.metas {
		if m.err == nil && m.txid != metas[0].txid {
			metas = append(metas, m)
		}
	}
	for i, m := range metas {
		if m.err != nil {
			continue
		}
		err := f.walk(m, false, func(bucket string, k, v []byte) {
			dead := bucket == string(deadBucket)
			if !dead && bucket != string(queueBucket) {
				return
			}
			ev, err := decodeEvent(v)
			if err == nil && len(k) != keyLen {
				err = errCorrupt
			}
			if err == nil {
				err = ev.validate()
			}
			if err != nil {
				if i == 0 {
					skipped++
				}
				return
			}
			if seen[ev.ID] {
				return
			}
			seen[ev.ID] = true
			recs = append(recs, salvaged{val: append([]byte(nil), v...), dead: dead})
		})
		if err != nil && i == 0 {
			skipped += len(unwrapJoined(err))
		}
	}
	return recs, skipped
}

// unwrapJoined splits an errors.Join result.
func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// seed writes salvaged records into a fresh store's buckets, under new
// sequence numbers, before the index is built.
func (s *Store) seed(recs []salvaged) error {
	if len(recs) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := createBuckets(tx)
		if err != nil {
			return err
		}
		for _, r := range recs {
			seq, err := b.queue.NextSequence()
			if err != nil {
				return err
			}
			into := b.queue
			if r.dead {
				into = b.dead
			}
			if err := into.Put(seqKey(seq), r.val); err != nil {
				return err
			}
		}
		return nil
	})
}

// guarded runs fn (which reads the mapped file) so that a panic or a
// memory fault in bbolt becomes a *CorruptError instead of ending the
// process. The file was checked before; this is the second line of
// defence.
func guarded(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &CorruptError{Path: path, Reason: fmt.Errorf("bbolt failed reading it: %v", r)}
		}
	}()
	return fn()
}

// mirrorMeta commits an empty transaction after a change, so that both of
// bbolt's meta pages describe the same (latest) state: bbolt writes one
// meta page per transaction, alternating, and falls back to the other one
// when a meta page is damaged, which without the mirror is the state
// before the last commit. Appends are acknowledged only after it.
func (s *Store) mirrorMeta() error {
	return s.db.Update(func(*bolt.Tx) error { return nil })
}
