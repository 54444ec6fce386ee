package cluster

import (
	"context"
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

	stopSub, stopWatch, stopState func()
	done                          chan struct{}
	wg                            sync.WaitGroup
}

// wireRecord is one address and a time (a failure's, or a lock's end).
type wireRecord struct {
	addr Addr
	ms   int64
}

// Wire format of a failure broadcast: 'h', version 1, kind 'f', node id
// length and bytes, uint16 count, then count × (16-byte address, int64
// Unix milliseconds). A lock record (the bucket value) is 'h', 1, 'l',
// node, one record.
const (
	wireMagic   = 'h'
	wireVersion = 1
	kindFail    = 'f'
	kindLock    = 'l'
	recordSize  = 16 + 8
	maxNodeLen  = 64
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
	return &LockSync{b: b, target: target, opt: opt, node: b.Node(), kick: make(chan struct{}, 1), done: make(chan struct{})}
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
			val := appendWire(nil, kindLock, s.node, []wireRecord{l})
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
		*buf = appendWire((*buf)[:0], kindFail, s.node, fails[:n])
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

// onBroadcast folds another node's failures into the local table.
func (s *LockSync) onBroadcast(msg []byte) {
	kind, node, recs, err := parseWire(msg)
	if err != nil || kind != kindFail || node == s.node {
		return
	}
	for _, r := range recs {
		s.target.FoldFailure(r.addr, time.UnixMilli(r.ms))
	}
	s.opt.Metrics.remoteFailures(len(recs))
}

// onLock applies a lock record another node (or an earlier run) wrote.
func (s *LockSync) onLock(val []byte) {
	kind, _, recs, err := parseWire(val)
	if err != nil || kind != kindLock || len(recs) != 1 {
		return
	}
	until := time.UnixMilli(recs[0].ms)
	if time.Now().Before(until) && s.target.ApplyLock(recs[0].addr, until) {
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

// appendWire encodes records of kind from node.
func appendWire(b []byte, kind byte, node string, recs []wireRecord) []byte {
	node = node[:min(len(node), maxNodeLen)]
	b = append(b, wireMagic, wireVersion, kind, byte(len(node)))
	b = append(b, node...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(recs)))
	for _, r := range recs {
		b = append(b, r.addr[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(r.ms))
	}
	return b
}

var errWire = errors.New("malformed lockout message")

// parseWire decodes a message of appendWire.
func parseWire(b []byte) (kind byte, node string, recs []wireRecord, err error) {
	if len(b) < 4 || b[0] != wireMagic || b[1] != wireVersion {
		return 0, "", nil, errWire
	}
	kind = b[2]
	nl := int(b[3])
	b = b[4:]
	if len(b) < nl+2 {
		return 0, "", nil, errWire
	}
	node, b = string(b[:nl]), b[nl:]
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) != n*recordSize {
		return 0, "", nil, errWire
	}
	recs = make([]wireRecord, n)
	for i := range recs {
		copy(recs[i].addr[:], b[:16])
		recs[i].ms = int64(binary.BigEndian.Uint64(b[16:24]))
		b = b[recordSize:]
	}
	return kind, node, recs, nil
}
