package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Addr is a client address reduced to its lockout identity (an IPv4
// address in IPv6 form, or an IPv6 address masked to the lockout prefix).
type Addr [16]byte

// LockTarget is the node's own lockout table, into which the other nodes'
// failures and locks are folded.
type LockTarget interface {
	// FoldFailure counts a failure that another node saw at at.
	FoldFailure(a Addr, at time.Time)
	// ApplyLock locks a until until unless it is locked at least that
	// long already; it reports whether the table changed.
	ApplyLock(a Addr, until time.Time) bool
}

// LockSyncOptions tune a LockSync.
type LockSyncOptions struct {
	// Flush is how long failures are batched before one broadcast
	// (default 5ms).
	Flush time.Duration
	// MaxBatch flushes early when this many failures are pending and caps
	// what one broadcast carries (default 2048).
	MaxBatch int
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
	// Metrics, when set, counts remote failures and locks applied.
	Metrics *Metrics
	// Logger receives one line per engine state change.
	Logger *zap.Logger
}

// LockSync shares a node's authentication failures and locks with the
// other nodes and folds theirs into its own table. Failure and Locked are
// cheap and never block on the network: the node's own check stays local,
// and with the engine unreachable every node keeps its own budget.
type LockSync struct {
	b      Backend
	target LockTarget
	opt    LockSyncOptions
	node   string

	mu      sync.Mutex
	fails   []wireRecord
	locks   []wireRecord
	dropped uint64
	kick    chan struct{}

	sender  [senderLen]byte // this LockSync's id in its broadcasts
	seq     uint64          // its last broadcast's number (flusher only)
	seenMu  sync.Mutex
	seen    map[[senderLen]byte]seenSender // the last broadcast of each sender
	pruneAt time.Time

	stopSub, stopWatch, stopState func()
	done                          chan struct{}
	wg                            sync.WaitGroup
}

// wireRecord is one address and a time (a failure's, or a lock's end).
type wireRecord struct {
	addr Addr
	ms   int64
}

// seenSender is the newest broadcast received from one sender.
type seenSender struct {
	seq uint64
	at  time.Time
}

// Wire format of a failure broadcast: 'h', version 2, kind 'f', node id
// length and bytes, the sender's 8-byte id, its uint64 broadcast number,
// uint16 count, then count × (16-byte address, int64 Unix milliseconds).
// A receiver drops a broadcast whose number is not above the last one of
// its sender (a replay). A lock record (the bucket value) is 'h', 2, 'l',
// node, sender, 0, one record. The engine seals both.
const (
	wireMagic   = 'h'
	wireVersion = 2
	kindFail    = 'f'
	kindLock    = 'l'
	recordSize  = 16 + 8
	maxNodeLen  = 64
	senderLen   = 8
)

// NewLockSync returns a LockSync for b folding into target; Start begins it.
func NewLockSync(b Backend, target LockTarget, opt LockSyncOptions) *LockSync {
	if opt.Flush <= 0 {
		opt.Flush = 5 * time.Millisecond
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 2048
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 2 * time.Second
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
		seen: make(map[[senderLen]byte]seenSender)}
	_, _ = rand.Read(s.sender[:])
	return s
}

// Start subscribes to the other nodes' failures, reads back the live locks
// and starts the flusher.
func (s *LockSync) Start() error {
	var err error
	if s.stopSub, err = s.b.Subscribe(s.onBroadcast); err != nil {
		return err
	}
	if s.stopWatch, err = s.b.WatchLocks(s.onLock); err != nil {
		s.stopSub()
		return err
	}
	s.stopState = s.b.Watch(s.onState)
	s.wg.Add(1)
	go s.flusher()
	return nil
}

// Close stops the broadcasts and subscriptions, dropping what is pending.
func (s *LockSync) Close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.wg.Wait()
	s.stopSub()
	s.stopWatch()
	s.stopState()
}

// Failure queues one local failure for the next broadcast.
func (s *LockSync) Failure(a Addr, at time.Time) {
	s.mu.Lock()
	if len(s.fails) >= 8*s.opt.MaxBatch {
		s.dropped++ // the engine is slower than the flood; local budget still applies
		s.mu.Unlock()
		return
	}
	s.fails = append(s.fails, wireRecord{a, at.UnixMilli()})
	full := len(s.fails) >= s.opt.MaxBatch
	s.mu.Unlock()
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// Locked records a lock this node applied, for the nodes that start or
// reconnect later (and those that missed failures).
func (s *LockSync) Locked(a Addr, until time.Time) {
	s.mu.Lock()
	if len(s.locks) < 8*s.opt.MaxBatch {
		s.locks = append(s.locks, wireRecord{a, until.UnixMilli()})
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// lockRetryDelay is the pause before writing locks again after a write
// failed.
const lockRetryDelay = 250 * time.Millisecond

// flusher broadcasts the pending failures every Flush interval and writes
// the pending locks. Failures seen while the engine is unreachable are
// dropped (each node keeps its own budget meanwhile); locks are kept, each
// until it ends, and written once the engine is back, so that a lock made
// during an outage still reaches the other nodes.
func (s *LockSync) flusher() {
	defer s.wg.Done()
	t := time.NewTicker(s.opt.Flush)
	defer t.Stop()
	var fails, locks, failed []wireRecord
	var buf []byte
	var retryAt time.Time
	wasUp := true
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		case <-s.kick:
		}
		s.mu.Lock()
		fails, s.fails = s.fails, fails[:0]
		locks, s.locks = s.locks, locks[:0]
		s.mu.Unlock()
		up := s.b.Up()
		if up && !wasUp {
			retryAt = time.Time{} // back: write what was kept at once
		}
		wasUp = up
		if !up || time.Now().Before(retryAt) {
			s.keepLocks(locks)
			if up {
				s.broadcast(fails, &buf)
			}
			continue
		}
		s.broadcast(fails, &buf)
		failed = failed[:0]
		for _, l := range locks {
			val := s.appendWire(nil, kindLock, 0, []wireRecord{l})
			ttl := time.Until(time.UnixMilli(l.ms))
			if ttl <= 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.opt.Timeout)
			start := time.Now()
			err := s.b.PutLock(ctx, hex.EncodeToString(l.addr[:]), val, ttl)
			cancel()
			s.opt.Metrics.observe("lock_put", start, err)
			if err != nil {
				failed = append(failed, l)
			}
		}
		if len(failed) > 0 {
			s.keepLocks(failed)
			retryAt = time.Now().Add(lockRetryDelay)
		}
	}
}

// broadcast sends fails in batches of at most MaxBatch.
func (s *LockSync) broadcast(fails []wireRecord, buf *[]byte) {
	for len(fails) > 0 {
		n := min(len(fails), s.opt.MaxBatch)
		s.seq++
		*buf = s.appendWire((*buf)[:0], kindFail, s.seq, fails[:n])
		start := time.Now()
		err := s.b.Broadcast(*buf)
		s.opt.Metrics.observe("broadcast", start, err)
		fails = fails[n:]
	}
}

// keepLocks puts locks not yet written back in front of the pending ones,
// dropping those that ended, within the pending bound.
func (s *LockSync) keepLocks(locks []wireRecord) {
	now := time.Now().UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := make([]wireRecord, 0, len(locks)+len(s.locks))
	for _, l := range locks {
		if l.ms > now && len(kept) < 8*s.opt.MaxBatch {
			kept = append(kept, l)
		}
	}
	for _, l := range s.locks {
		if len(kept) < 8*s.opt.MaxBatch {
			kept = append(kept, l)
		}
	}
	s.locks = kept
}

// onBroadcast folds another node's failures into the local table, each
// at its time clamped to [now − window, now + skew].
func (s *LockSync) onBroadcast(msg []byte) {
	w, err := parseWire(msg)
	if err != nil || w.kind != kindFail || w.node == s.node {
		return
	}
	now := time.Now()
	if !s.fresh(w.sender, w.seq, now) {
		s.opt.Metrics.Rejected(RejectedFailures)
		return
	}
	lo, hi := now.Add(-s.opt.Window).UnixMilli(), now.Add(s.opt.ClockSkew).UnixMilli()
	for _, r := range w.recs {
		s.target.FoldFailure(r.addr, time.UnixMilli(min(max(r.ms, lo), hi)))
	}
	s.opt.Metrics.remoteFailures(len(w.recs))
}

// fresh reports whether broadcast seq of sender comes after the last one
// received from it (not a replay), and records it.
func (s *LockSync) fresh(sender [senderLen]byte, seq uint64, now time.Time) bool {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	if last, ok := s.seen[sender]; ok && seq <= last.seq {
		return false
	}
	s.seen[sender] = seenSender{seq: seq, at: now}
	// a sender silent for a window is forgotten: a replay of its
	// broadcasts would carry failures that are out of the window by then
	if keep := s.opt.Window + s.opt.ClockSkew; now.After(s.pruneAt) {
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
// its end clamped to now + lockout + skew.
func (s *LockSync) onLock(val []byte) {
	w, err := parseWire(val)
	if err != nil || w.kind != kindLock || len(w.recs) != 1 {
		return
	}
	now := time.Now()
	until := time.UnixMilli(min(w.recs[0].ms, now.Add(s.opt.Lockout+s.opt.ClockSkew).UnixMilli()))
	if now.Before(until) && s.target.ApplyLock(w.recs[0].addr, until) {
		s.opt.Metrics.remoteLock()
	}
}

// onState logs each change of the engine's reachability.
func (s *LockSync) onState(up bool) {
	if up {
		s.opt.Logger.Info("cluster reachable: lockout shared across nodes again")
	} else {
		s.opt.Logger.Warn("cluster unreachable: lockout falls back to this node's own budget")
	}
}

// appendWire encodes records of kind, numbered seq, from this node.
func (s *LockSync) appendWire(b []byte, kind byte, seq uint64, recs []wireRecord) []byte {
	node := s.node[:min(len(s.node), maxNodeLen)]
	b = append(b, wireMagic, wireVersion, kind, byte(len(node)))
	b = append(b, node...)
	b = append(b, s.sender[:]...)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = append(b, r.addr[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(r.ms))
	}
	return b
}

var errWire = errors.New("malformed lockout message")

// wireMsg is a decoded broadcast or lock record.
type wireMsg struct {
	kind   byte
	node   string
	sender [senderLen]byte
	seq    uint64
	recs   []wireRecord
}

// parseWire decodes a message of appendWire.
func parseWire(b []byte) (w wireMsg, err error) {
	if len(b) < 4 || b[0] != wireMagic || b[1] != wireVersion {
		return w, errWire
	}
	w.kind = b[2]
	nl := int(b[3])
	b = b[4:]
	if len(b) < nl+senderLen+8+2 {
		return w, errWire
	}
	w.node, b = string(b[:nl]), b[nl:]
	copy(w.sender[:], b)
	w.seq = binary.BigEndian.Uint64(b[senderLen:])
	b = b[senderLen+8:]
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != n*recordSize {
		return w, errWire
	}
	w.recs = make([]wireRecord, n)
	for i := range w.recs {
		copy(w.recs[i].addr[:], b[:16])
		w.recs[i].ms = int64(binary.BigEndian.Uint64(b[16:24]))
		b = b[recordSize:]
	}
	return w, nil
}
