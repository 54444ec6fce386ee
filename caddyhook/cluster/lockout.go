package cluster

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/version"
)

// Addr is a client address reduced to its lockout identity (an IPv4
// address in IPv6 form, or an IPv6 address masked to the lockout prefix).
type Addr [16]byte

// LockTarget is the node's own lockout table, into which the failures it
// owns and the other nodes' locks are folded.
type LockTarget interface {
	// FoldFailure counts a failure that another node saw at at. It
	// returns the end of the address's lock (zero: not locked) and
	// whether this failure locked it.
	FoldFailure(a Addr, at time.Time) (until time.Time, newly bool)
	// ApplyLock locks a up to until unless it is locked at least that
	// long already; it reports whether the table changed.
	ApplyLock(a Addr, until time.Time) bool
}

// LockSyncOptions tune a LockSync.
type LockSyncOptions struct {
	// Flush paces the batches: a node sends at most one batch per Flush
	// (default 5ms), besides batches that are full; the first failure
	// after a quiet spell goes at once.
	Flush time.Duration
	// MaxBatch caps what one batch carries (default 2048).
	MaxBatch int
	// HoldAfter is how many failures of one address a node may have sent
	// to the address's owner and not yet seen confirmed before it holds
	// the address back (answers as for a lock, evaluating nothing) until
	// the owner answers (default 2).
	HoldAfter int
	// AckTimeout is how long a batch waits for the owner's confirmation
	// before its failures count as lost (default: the members' expiry
	// plus Timeout, so that an owner that died is forgotten first, which
	// releases its batches at once; this only covers a confirmation lost
	// on the way from a live owner).
	AckTimeout time.Duration
	// MemberInterval is how often a node announces itself (default
	// DefaultMemberInterval).
	MemberInterval time.Duration
	// LockTTL is how long a lock record lives at most (the longest lock).
	LockTTL time.Duration
	// Window is the failure window and Lockout the longest lock of the
	// node's lockout policy: a failure read from another node counts at
	// most Window in the past and ClockSkew in the future, a lock read
	// from another node ends at most Lockout + ClockSkew from now.
	Window, Lockout time.Duration
	// ClockSkew overrides the backend's ClockSkew (0 = the backend's).
	ClockSkew time.Duration
	// Timeout bounds one lock write.
	Timeout time.Duration
	// Metrics, when set, counts remote failures, locks applied, held
	// requests and the members.
	Metrics *Metrics
	// Logger receives one line per engine state change.
	Logger *zap.Logger
}

// LockSync shares a node's lockout with the other nodes at a cost per
// node that does not grow with their number. Each address's count is
// owned by one member (rendezvous hashing over the live members): a node
// counts its own failures in its own table (its budget when the engine is
// unreachable) and sends those of addresses another member owns to that
// owner, in batches; the owner folds them into its table, so it counts
// the address's failures cluster-wide, and confirms each batch with the
// locks of its addresses. When a failure locks an address (on any node)
// the lock goes to the locks bucket, which every node watches: only
// locks, at most one per limit failures, reach every node.
//
// A node holds an address back while HoldAfter of its failures are not
// yet confirmed by their owner: its requests are then answered as for a
// lock, evaluating nothing. So the guesses evaluated cluster-wide before
// every node has locked an address are at most limit + HoldAfter × (nodes
// − 1), however fast they come. Failure, Held and Locked never block on
// the network.
type LockSync struct {
	b       Backend
	target  LockTarget
	opt     LockSyncOptions
	node    string
	members *Members
	inbox   string // this member's inbox topic

	mu       sync.Mutex
	queues   map[memberID]*ownerQueue // failures waiting to be sent, by owner
	queued   int
	pending  map[Addr]uint16   // failures sent or queued and not confirmed, by address
	inflight map[uint64]*batch // batches sent and not confirmed, by number
	locks    []wireRecord
	dropped  uint64
	seq      uint64    // the last batch's number
	lastSend time.Time // of the last paced batch
	holding  atomic.Int32
	kick     chan struct{}

	seenMu  sync.Mutex
	seen    map[memberID]seenSender // the last batch of each sender
	pruneAt time.Time

	stopSub, stopWatch, stopState func()
	done                          chan struct{}
	wg                            sync.WaitGroup
	closeOnce                     sync.Once
}

// ownerQueue is the failures waiting for one owner.
type ownerQueue struct {
	recs  []wireRecord
	since time.Time // when the oldest was queued
}

// batch is a batch sent and not yet confirmed.
type batch struct {
	owner memberID
	addrs []Addr
	sent  time.Time
}

// seenSender is the newest batch received from one sender.
type seenSender struct {
	seq uint64
	at  time.Time
}

// maxPendingFactor × MaxBatch bounds the failures waiting to be sent and
// the addresses tracked as pending: a flood the engine cannot carry is
// not shared beyond that (each node's own budget still applies).
const maxPendingFactor = 8

// NewLockSync returns a LockSync for b folding into target; Start begins it.
func NewLockSync(b Backend, target LockTarget, opt LockSyncOptions) *LockSync {
	if opt.Flush <= 0 {
		opt.Flush = 5 * time.Millisecond
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 2048
	}
	if opt.HoldAfter <= 0 {
		opt.HoldAfter = 2
	}
	if opt.Timeout <= 0 {
		opt.Timeout = b.Timeout()
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Second
	}
	if opt.MemberInterval <= 0 {
		opt.MemberInterval = DefaultMemberInterval
	}
	if opt.AckTimeout <= 0 {
		opt.AckTimeout = memberExpiry*opt.MemberInterval + opt.Timeout
	}
	if opt.Logger == nil {
		opt.Logger = zap.NewNop()
	}
	if opt.ClockSkew <= 0 {
		opt.ClockSkew = b.ClockSkew()
	}
	if opt.Lockout <= 0 {
		opt.Lockout = opt.LockTTL
	}
	if opt.Window <= 0 {
		opt.Window = opt.LockTTL
	}
	s := &LockSync{b: b, target: target, opt: opt, node: b.Node(), kick: make(chan struct{}, 1), done: make(chan struct{}),
		queues: map[memberID]*ownerQueue{}, pending: map[Addr]uint16{}, inflight: map[uint64]*batch{},
		seen: map[memberID]seenSender{}}
	s.members = NewMembers(b, TopicLockout, opt.MemberInterval, s.onMembers)
	s.inbox = LockoutInbox(s.members.ID())
	return s
}

// Start subscribes to this member's inbox, reads back the live locks,
// announces this member and starts the sender.
func (s *LockSync) Start() error {
	var err error
	if s.stopSub, err = s.b.Subscribe(s.inbox, s.onInbox); err != nil {
		return err
	}
	if s.stopWatch, err = s.b.WatchLocks(s.onLock); err != nil {
		s.stopSub()
		return err
	}
	if err := s.members.Start(); err != nil {
		s.stopSub()
		s.stopWatch()
		return err
	}
	s.stopState = s.b.Watch(s.onState)
	s.opt.Metrics.lockoutMembers(s.b.Name(), s.members.Count())
	s.wg.Add(1)
	go s.flusher()
	return nil
}

// Close stops sharing: the other members learn that this one left (the
// counts it owned are lost: soft state), what is pending is dropped.
func (s *LockSync) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.wg.Wait()
		s.stopState()
		s.members.Close()
		s.stopSub()
		s.stopWatch()
	})
}

// Members is the number of live members this node sees, itself included.
func (s *LockSync) Members() int { return s.members.Count() }

// Pending is the number of this node's failures sent (or waiting to be
// sent) to their owner and not yet confirmed.
func (s *LockSync) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.pending {
		n += int(c)
	}
	return n
}

// Owns reports whether this node owns a's count now.
func (s *LockSync) Owns(a Addr) bool {
	_, self := s.members.owner(a)
	return self
}

// Inbox is the topic this member receives its failures and
// confirmations on.
func (s *LockSync) Inbox() string { return s.inbox }

// Failure shares one local failure of a, seen at at, with the owner of
// a's count, before the caller counts it. It returns false, sharing
// nothing, when a is held (HoldAfter failures of a unconfirmed): the
// caller must then answer as for a lock and count nothing. While the
// engine is unreachable, or when this node owns a, nothing is sent.
func (s *LockSync) Failure(a Addr, at time.Time) bool {
	if !s.b.Up() {
		return true
	}
	owner, self := s.members.owner(a)
	if self {
		return true
	}
	limit := maxPendingFactor * s.opt.MaxBatch
	s.mu.Lock()
	n := int(s.pending[a])
	if n >= s.opt.HoldAfter {
		s.mu.Unlock()
		s.opt.Metrics.held()
		return false
	}
	if s.queued >= limit || (n == 0 && len(s.pending) >= limit) {
		s.dropped++ // the engine is slower than the flood; the local budget still applies
		s.mu.Unlock()
		return true
	}
	s.pending[a] = uint16(n + 1)
	if n+1 == s.opt.HoldAfter {
		s.holding.Add(1)
	}
	q := s.queues[owner]
	if q == nil {
		q = &ownerQueue{}
		s.queues[owner] = q
	}
	if len(q.recs) == 0 {
		q.since = time.Now()
	}
	q.recs = append(q.recs, wireRecord{a, at.UnixMilli()})
	s.queued++
	wake := s.queued == 1 || len(q.recs) >= s.opt.MaxBatch
	s.mu.Unlock()
	if wake {
		signal(s.kick)
	}
	return true
}

// Held reports whether a is held back: HoldAfter of this node's failures
// of a are not yet confirmed by a's owner.
func (s *LockSync) Held(a Addr) bool {
	if s.holding.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.pending[a]) >= s.opt.HoldAfter
}

// Locked records a lock this node applied, for every other node (and
// those that start or reconnect later).
func (s *LockSync) Locked(a Addr, until time.Time) {
	s.mu.Lock()
	if len(s.locks) < maxPendingFactor*s.opt.MaxBatch {
		s.locks = append(s.locks, wireRecord{a, until.UnixMilli()})
	}
	s.mu.Unlock()
	signal(s.kick)
}

// signal does a non-blocking send.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// release forgets one pending failure of each address; s.mu is held.
func (s *LockSync) release(addrs []Addr) {
	for _, a := range addrs {
		n := int(s.pending[a])
		switch n {
		case 0:
			continue
		case 1:
			delete(s.pending, a)
		default:
			s.pending[a] = uint16(n - 1)
		}
		if n == s.opt.HoldAfter {
			s.holding.Add(-1)
		}
	}
}

// dropAll forgets every queued and unconfirmed failure (the engine is
// unreachable: each node keeps its own budget); s.mu is held.
func (s *LockSync) dropAll() {
	clear(s.queues)
	clear(s.inflight)
	clear(s.pending)
	s.queued = 0
	s.holding.Store(0)
}

// lockRetryDelay is the pause before writing locks again after a write
// failed.
const lockRetryDelay = 250 * time.Millisecond

// outgoing is a batch to publish.
type outgoing struct {
	seq   uint64
	owner memberID
	msg   []byte
}

// flusher sends the batches, expires the unconfirmed ones and writes the
// locks, sleeping while there is nothing to do. Failures seen while the
// engine is unreachable are dropped; locks are kept, each until it ends,
// and written once the engine is back, so that a lock made during an
// outage still reaches the other nodes.
func (s *LockSync) flusher() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var retryAt time.Time
	wasUp := true
	for {
		up := s.b.Up()
		if up && !wasUp {
			retryAt = time.Time{} // back: write what was kept at once
		}
		wasUp = up
		out, locks, next := s.collect(up, time.Now())
		for _, o := range out {
			start := time.Now()
			err := s.b.Broadcast(LockoutInbox(hex.EncodeToString(o.owner[:])), o.msg)
			s.opt.Metrics.observe("broadcast", start, err)
			if err != nil {
				s.lost(o.seq)
			}
		}
		switch {
		case len(locks) == 0:
		case !up || time.Now().Before(retryAt):
			s.keepLocks(locks)
		default:
			if failed := s.writeLocks(locks); len(failed) > 0 {
				s.keepLocks(failed)
				retryAt = time.Now().Add(lockRetryDelay)
			}
		}
		if s.hasLocks() {
			next = min(next, max(time.Until(retryAt), s.opt.Flush))
		}
		timer.Reset(next)
		select {
		case <-s.done:
			return
		case <-s.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// collect takes, under the lock, the batches due now (every full batch,
// and the oldest owner's failures once per Flush), expires the
// unconfirmed batches and takes the locks to write; next is when there is
// work again.
func (s *LockSync) collect(up bool, now time.Time) (out []outgoing, locks []wireRecord, next time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	locks, s.locks = s.locks, nil
	next = time.Hour
	if !up {
		s.dropAll()
		return nil, locks, next
	}
	for seq, bt := range s.inflight {
		if left := bt.sent.Add(s.opt.AckTimeout).Sub(now); left <= 0 {
			s.release(bt.addrs)
			delete(s.inflight, seq)
		} else {
			next = min(next, left)
		}
	}
	for owner, q := range s.queues {
		for len(q.recs) >= s.opt.MaxBatch {
			out = append(out, s.take(owner, q, now))
		}
	}
	if s.queued > 0 {
		if wait := s.lastSend.Add(s.opt.Flush).Sub(now); wait > 0 {
			next = min(next, wait)
		} else {
			var oldest memberID
			var at time.Time
			for owner, q := range s.queues {
				if len(q.recs) > 0 && (at.IsZero() || q.since.Before(at)) {
					oldest, at = owner, q.since
				}
			}
			out = append(out, s.take(oldest, s.queues[oldest], now))
			s.lastSend = now
			if s.queued > 0 {
				next = min(next, s.opt.Flush)
			}
		}
	}
	return out, locks, next
}

// take makes the next batch of q (at most MaxBatch failures) for owner
// and records it as unconfirmed; s.mu is held.
func (s *LockSync) take(owner memberID, q *ownerQueue, now time.Time) outgoing {
	n := min(len(q.recs), s.opt.MaxBatch)
	recs := q.recs[:n]
	s.seq++
	bt := &batch{owner: owner, addrs: make([]Addr, n), sent: now}
	for i, r := range recs {
		bt.addrs[i] = r.addr
	}
	s.inflight[s.seq] = bt
	msg := appendRecords(appendHeader(make([]byte, 0, 64+n*recordSize), kindFail, s.node, s.members.id, s.seq), recs)
	q.recs = append(q.recs[:0], q.recs[n:]...)
	q.since = now
	s.queued -= n
	if len(q.recs) == 0 {
		delete(s.queues, owner)
	}
	return outgoing{seq: s.seq, owner: owner, msg: msg}
}

// lost forgets batch seq, which could not be sent.
func (s *LockSync) lost(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bt := s.inflight[seq]; bt != nil {
		s.release(bt.addrs)
		delete(s.inflight, seq)
	}
}

// hasLocks reports whether locks wait to be written.
func (s *LockSync) hasLocks() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks) > 0
}

// writeLocks puts each lock in the bucket and returns those that failed.
func (s *LockSync) writeLocks(locks []wireRecord) (failed []wireRecord) {
	for _, l := range locks {
		ttl := time.Until(time.UnixMilli(l.ms))
		if ttl <= 0 {
			continue
		}
		// the record's number is its write time: a reader refuses the
		// record written back later (a replay, see onLock)
		val := appendRecords(appendHeader(nil, kindLock, s.node, s.members.id, uint64(time.Now().UnixMilli())), []wireRecord{l})
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.Timeout)
		start := time.Now()
		err := s.b.PutLock(ctx, hex.EncodeToString(l.addr[:]), val, ttl)
		cancel()
		s.opt.Metrics.observe("lock_put", start, err)
		if err != nil {
			failed = append(failed, l)
		}
	}
	return failed
}

// keepLocks puts locks not yet written back in front of the pending ones,
// dropping those that ended, within the pending bound.
func (s *LockSync) keepLocks(locks []wireRecord) {
	now := time.Now().UnixMilli()
	limit := maxPendingFactor * s.opt.MaxBatch
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := make([]wireRecord, 0, len(locks)+len(s.locks))
	for _, l := range locks {
		if l.ms > now && len(kept) < limit {
			kept = append(kept, l)
		}
	}
	for _, l := range s.locks {
		if len(kept) < limit {
			kept = append(kept, l)
		}
	}
	s.locks = kept
}

// onInbox handles what another member sent this one: failures of the
// addresses it owns, or the confirmation of a batch it sent.
func (s *LockSync) onInbox(msg []byte) {
	w, err := parseWire(msg)
	if v := newerWire(msg); v != 0 {
		s.opt.Metrics.Newer(version.StoreFailures, v) // a newer release's: not read (soft state)
	}
	if err != nil || w.sender == s.members.id {
		return
	}
	switch w.kind {
	case kindFail:
		s.onFailures(w)
	case kindAck:
		s.onAck(w)
	}
}

// onFailures folds another node's failures into the local table, each at
// its time clamped to [now − window, now + skew], and confirms the batch
// to its sender with the locks of its addresses.
func (s *LockSync) onFailures(w wireMsg) {
	now := time.Now()
	if !s.fresh(w.sender, w.seq, now) {
		s.opt.Metrics.Replayed(ReplayedFailures, len(w.recs))
		return
	}
	lo, hi := now.Add(-s.opt.Window).UnixMilli(), now.Add(s.opt.ClockSkew).UnixMilli()
	stale := lo - s.opt.ClockSkew.Milliseconds()
	var locks []wireRecord
	listed := map[Addr]bool{}
	replayed := 0
	for _, r := range w.recs {
		if r.ms < stale {
			// out of the window even for a sender whose clock is behind
			// by the skew: a batch replayed after its sender went quiet
			// (and was forgotten), never counted
			replayed++
			continue
		}
		until, newly := s.target.FoldFailure(r.addr, time.UnixMilli(min(max(r.ms, lo), hi)))
		if newly {
			s.Locked(r.addr, until)
		}
		if !until.IsZero() && !listed[r.addr] {
			listed[r.addr] = true
			locks = append(locks, wireRecord{r.addr, until.UnixMilli()})
		}
	}
	s.opt.Metrics.remoteFailures(len(w.recs) - replayed)
	s.opt.Metrics.Replayed(ReplayedFailures, replayed)
	ack := binary.BigEndian.AppendUint64(appendHeader(make([]byte, 0, 64), kindAck, s.node, s.members.id, 0), w.seq)
	_ = s.b.Broadcast(LockoutInbox(hex.EncodeToString(w.sender[:])), appendRecords(ack, locks))
}

// onAck applies the locks an owner confirmed a batch with (each ending at
// most lockout + skew from now), then stops holding its addresses back.
func (s *LockSync) onAck(w wireMsg) {
	s.mu.Lock()
	bt := s.inflight[w.batch]
	if bt == nil || bt.owner != w.sender {
		s.mu.Unlock()
		return
	}
	delete(s.inflight, w.batch)
	s.mu.Unlock()
	s.applyLocks(w.recs)
	s.mu.Lock()
	s.release(bt.addrs)
	s.mu.Unlock()
}

// applyLocks applies lock records read from another node, each ending at
// most lockout + skew from now.
func (s *LockSync) applyLocks(recs []wireRecord) {
	now := time.Now()
	maxEnd := now.Add(s.opt.Lockout + s.opt.ClockSkew).UnixMilli()
	for _, r := range recs {
		until := time.UnixMilli(min(r.ms, maxEnd))
		if now.Before(until) && s.target.ApplyLock(r.addr, until) {
			s.opt.Metrics.remoteLock()
		}
	}
}

// fresh reports whether batch seq of sender comes after the last one
// received from it (not a replay), and records it.
func (s *LockSync) fresh(sender memberID, seq uint64, now time.Time) bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if last, ok := s.seen[sender]; ok && seq <= last.seq {
		return false
	}
	s.seen[sender] = seenSender{seq: seq, at: now}
	// a sender silent for a window is forgotten: a replay of its
	// batches carries failures that are out of the window by then, which
	// onFailures drops
	if keep := s.opt.Window + 2*s.opt.ClockSkew; now.After(s.pruneAt) {
		for k, v := range s.seen {
			if now.Sub(v.at) > keep {
				delete(s.seen, k)
			}
		}
		s.pruneAt = now.Add(keep)
	}
	return true
}

// onLock applies a lock record another node (or an earlier run) wrote,
// its end clamped to now + lockout + skew, unless it is a replay: a
// record whose write time (its number) is more than FreshWindow before
// the engine stored it was written back later, after an operator may have
// lifted the lock. A record without a write time (written before v0.9.0)
// is applied while a node of such a release runs (the cluster level is
// 0), and refused once none does.
func (s *LockSync) onLock(val []byte, stored time.Time) {
	w, err := parseWire(val)
	if v := newerWire(val); v != 0 {
		s.opt.Metrics.Newer(version.StoreLock, v) // left in the bucket for that release, not applied here
	}
	if err != nil || w.kind != kindLock {
		return
	}
	if w.seq == 0 && s.b.Gate().AtLeast(LevelFreshRecords) ||
		w.seq != 0 && !Fresh(time.UnixMilli(int64(w.seq)), stored, s.opt.ClockSkew, s.opt.Timeout) {
		s.opt.Metrics.Replayed(ReplayedLock, 1)
		return
	}
	s.applyLocks(w.recs)
}

// onMembers moves the queued failures of addresses whose owner changed
// to their new owner (those this node now owns are dropped: it counts
// them already) and gives up the batches sent to members that are gone:
// their counts were soft state.
func (s *LockSync) onMembers() {
	s.opt.Metrics.lockoutMembers(s.b.Name(), s.members.Count())
	live := map[memberID]bool{}
	for _, id := range s.members.view.Load().ids {
		live[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq, bt := range s.inflight {
		if !live[bt.owner] {
			s.release(bt.addrs)
			delete(s.inflight, seq)
		}
	}
	old := s.queues
	s.queues, s.queued = map[memberID]*ownerQueue{}, 0
	now := time.Now()
	for _, q := range old {
		for _, r := range q.recs {
			owner, self := s.members.owner(r.addr)
			if self {
				s.release([]Addr{r.addr})
				continue
			}
			nq := s.queues[owner]
			if nq == nil {
				nq = &ownerQueue{since: now}
				s.queues[owner] = nq
			}
			nq.recs = append(nq.recs, r)
			s.queued++
		}
	}
	if s.queued > 0 {
		signal(s.kick)
	}
}

// onState logs each change of the engine's reachability and wakes the
// sender (down: it drops what is pending; up: it writes the kept locks).
func (s *LockSync) onState(up bool) {
	if up {
		s.opt.Logger.Info("cluster reachable: lockout shared across nodes again")
	} else {
		s.opt.Logger.Warn("cluster unreachable: lockout falls back to this node's own budget")
	}
	signal(s.kick)
}
