package spool

import (
	"context"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// Group-commit limits: one bbolt transaction (one fsync) takes every pending
// operation up to these bounds.
const (
	opQueueLen    = 1024
	maxBatchOps   = 512
	maxBatchBytes = 16 << 20
)

// Bucket names.
var (
	queueBucket = []byte("queue")
	deadBucket  = []byte("dead")
)

// keyLen is the size of a record key: a big-endian uint64 sequence.
const keyLen = 8

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, keyLen), seq)
}

func keySeq(k []byte) uint64 { return binary.BigEndian.Uint64(k) }

// recordSize is what one stored record counts against MaxBytes.
func recordSize(val []byte) int64 { return int64(keyLen + len(val)) }

// buckets are the store's buckets inside one write transaction.
type buckets struct {
	queue, dead *bolt.Bucket
}

// op is one change handed to the committer. apply runs inside the shared
// write transaction (and may run again if another op of the batch fails);
// settle runs once with the outcome, with the store's mutex held.
type op interface {
	apply(b buckets) error
	settle(s *Store, err error)
	weight() int
}

// appendOp stores new events; the caller waits on result.
type appendOp struct {
	evs    []*Event
	vals   [][]byte
	size   int64 // reserved against MaxBytes
	seqs   []uint64
	result chan error
}

func (o *appendOp) apply(b buckets) error {
	for i, v := range o.vals {
		seq, err := b.queue.NextSequence()
		if err != nil {
			return err
		}
		if err := b.queue.Put(seqKey(seq), v); err != nil {
			return err
		}
		o.seqs[i] = seq
	}
	return nil
}

func (o *appendOp) settle(s *Store, err error) {
	if err != nil {
		s.bytes -= o.size
		return
	}
	for i, ev := range o.evs {
		ev.Seq = o.seqs[i]
		s.idx.insert(&item{
			seq:       o.seqs[i],
			size:      recordSize(o.vals[i]),
			firstSeen: ev.FirstSeen,
			nextTry:   ev.NextTry,
			attempts:  ev.Attempts,
			wake:      ev.isWake(),
		})
	}
	s.appended.Add(uint64(len(o.evs)))
}

func (o *appendOp) weight() int { return int(o.size) }

// deleteOp removes a delivered event; its bytes were released on submit.
type deleteOp struct {
	seq  uint64
	size int64
}

func (o *deleteOp) apply(b buckets) error { return b.queue.Delete(seqKey(o.seq)) }

func (o *deleteOp) settle(s *Store, err error) {
	if err != nil {
		s.bytes += o.size
		s.log.Error("spool: removing delivered event failed; it will be sent again after a restart",
			zap.Uint64("seq", o.seq), zap.Error(err))
	}
}

func (o *deleteOp) weight() int { return keyLen }

// updateOp rewrites a queued event after a failed attempt (attempts, next
// try, last error), so backoff and the age limit survive a restart.
type updateOp struct {
	seq uint64
	val []byte
}

func (o *updateOp) apply(b buckets) error {
	k := seqKey(o.seq)
	if b.queue.Get(k) == nil {
		return nil // delivered or dead-lettered meanwhile
	}
	return b.queue.Put(k, o.val)
}

func (o *updateOp) settle(s *Store, err error) {
	if err != nil {
		s.log.Warn("spool: recording a failed attempt failed", zap.Uint64("seq", o.seq), zap.Error(err))
	}
}

func (o *updateOp) weight() int { return len(o.val) }

// buryOp moves a queued event to the dead-letter bucket under the same key.
type buryOp struct {
	seq   uint64
	val   []byte
	delta int64 // byte change applied on submit
}

func (o *buryOp) apply(b buckets) error {
	k := seqKey(o.seq)
	if err := b.queue.Delete(k); err != nil {
		return err
	}
	return b.dead.Put(k, o.val)
}

func (o *buryOp) settle(s *Store, err error) {
	if err != nil {
		s.deadDepth--
		s.bytes -= o.delta
		s.log.Error("spool: dead-lettering failed; the event stays queued on disk and is retried after a restart",
			zap.Uint64("seq", o.seq), zap.Error(err))
	}
}

func (o *buryOp) weight() int { return len(o.val) }

// commitLoop is the group committer: it takes every operation queued while
// the previous transaction was being written and commits them together, so
// concurrent writers share one fsync without waiting on a timer.
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	batch := make([]op, 0, maxBatchOps)
	for first := range s.ops {
		batch = append(batch[:0], first)
		size := first.weight()
	drain:
		for len(batch) < maxBatchOps && size < maxBatchBytes {
			select {
			case o, ok := <-s.ops:
				if !ok {
					break drain
				}
				batch = append(batch, o)
				size += o.weight()
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch)
	}
}

// opError marks the operation whose apply failed, so the batch is retried
// without it.
type opError struct {
	i   int
	err error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// commit writes batch in one transaction, then, when it stored new events,
// mirrors the meta page (see mirrorMeta) before anyone is told. An op whose apply fails is dropped
// with its error and the rest are committed without it; a failed commit
// fails every op of the batch.
func (s *Store) commit(batch []op) {
	errs := make([]error, len(batch))
	for {
		err := s.db.Update(func(tx *bolt.Tx) error {
			b := buckets{queue: tx.Bucket(queueBucket), dead: tx.Bucket(deadBucket)}
			for i, o := range batch {
				if errs[i] != nil {
					continue
				}
				if err := o.apply(b); err != nil {
					return &opError{i: i, err: err}
				}
			}
			return nil
		})
		if eo, ok := errors.AsType[*opError](err); ok {
			s.log.Error("spool: write failed", zap.Error(eo.err))
			errs[eo.i] = eo.err
			continue
		}
		if err != nil {
			s.log.Error("spool: commit failed", zap.Int("ops", len(batch)), zap.Error(err))
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		} else if appends(batch, errs) {
			if err := s.mirrorMeta(); err != nil {
				// committed, but only one meta page describes it yet
				s.log.Error("spool: mirroring the meta page failed", zap.Error(err))
			}
		}
		break
	}
	s.commits.Add(1)

	var wake, agent bool
	s.mu.Lock()
	for i, o := range batch {
		o.settle(s, errs[i])
		if a, ok := o.(*appendOp); ok && errs[i] == nil {
			for _, ev := range a.evs {
				wake = wake || ev.isWake()
				agent = agent || !ev.isWake()
			}
		}
	}
	s.mu.Unlock()
	if wake {
		nudge(s.wakeSig)
	}
	if agent {
		nudge(s.agentSig)
	}
	for i, o := range batch {
		if w, ok := o.(waiter); ok {
			w.notify(errs[i])
		}
	}
}

// appends reports whether batch stored new events. Only those need the
// mirrored meta page: losing the last commit of deliveries, retries or
// dead-lettering to a damaged meta page sends an event again, which the
// gateway's Idempotency-Key absorbs, but losing an append loses an event
// that was acknowledged.
func appends(batch []op, errs []error) bool {
	for i, o := range batch {
		if _, ok := o.(*appendOp); ok && errs[i] == nil {
			return true
		}
	}
	return false
}

// waiter is an op whose submitter waits for its outcome.
type waiter interface{ notify(err error) }

func (o *appendOp) notify(err error) { o.result <- err }

// barrierOp changes nothing; its commit proves that every op queued before
// it has been committed.
type barrierOp struct{ result chan error }

func (o *barrierOp) apply(buckets) error  { return nil }
func (o *barrierOp) settle(*Store, error) {}
func (o *barrierOp) weight() int          { return 0 }
func (o *barrierOp) notify(err error)     { o.result <- err }

// flush waits until every op queued so far is committed.
func (s *Store) flush() error {
	o := &barrierOp{result: make(chan error, 1)}
	if err := s.submit(context.Background(), o); err != nil {
		return err
	}
	return <-o.result
}

// nudge wakes one worker waiting on sig without blocking.
func nudge(sig chan struct{}) {
	select {
	case sig <- struct{}{}:
	default:
	}
}
