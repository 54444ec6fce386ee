package natscluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/version"
)

// The wake lane keeps the acceptance order of wake events across every
// delivery node: one delivery node at a time holds the lane's lease (a
// key in the lanes bucket, whose TTL ends a lease its holder no longer
// renews) and delivers the wake events one after the other, in stream
// order, fetching them in batches and acknowledging each without waiting
// for the server's confirmation, so a wake costs one gateway call, not
// also two round trips to NATS. A failed send is retried in place (with
// the spool's backoff) before the next wake goes.
//
// A new holder whose predecessor did not hand over (it died, or lost
// NATS) may find wake events that predecessor was sent and did not
// acknowledge: it waits ack_wait (plus a second) first, so that those
// come back to it before any later one (the server redelivers before it
// delivers new messages). A holder that stops (a reload, a pause, a
// shutdown) gives back what it fetched and did not send, in order, and
// marks the lease released: the next holder starts at once.

// wakeBatch is how many wake events the holder fetches at once (and the
// wake consumer's limit of events delivered and not acknowledged).
const wakeBatch = 256

// leaseKey is the wake lane's key in the lanes bucket.
const leaseKey = "wake"

// Lease states. The value, sealed, is the state byte and the holder's
// node id; from v0.9.0 (version 2, internal/version.LeaseRecord) followed
// by a NUL, the version byte and the write time (int64 Unix ms), which
// its readers check against the server's time of the write, so that a
// lease written back later (a replay) holds nothing. A release before
// v0.9.0 reads a version 2 lease as held by another node (it compares the
// rest of the value with its own id), which it is.
const (
	leaseHeld     = 'h'
	leaseReleased = 'r'
	leaseVersion  = 2
)

// leaseRecord is a decoded lease value.
type leaseRecord struct {
	state   byte
	node    string
	version int
	written time.Time // version 2
}

// parseLease decodes a lease value (opened): version 1 has no NUL after
// the state byte; version 2 and later have NUL, version, and (2) the time.
func parseLease(v []byte) (leaseRecord, bool) {
	if len(v) == 0 {
		return leaseRecord{}, false
	}
	l := leaseRecord{state: v[0], version: 1}
	rest := v[1:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		l.node = string(rest)
		return l, true
	}
	l.node, rest = string(rest[:i]), rest[i+1:]
	if len(rest) == 0 {
		return leaseRecord{}, false
	}
	l.version = int(rest[0])
	switch {
	case l.version > leaseVersion:
		return l, true
	case l.version != leaseVersion || len(rest) != 1+8:
		return leaseRecord{}, false
	}
	l.written = time.UnixMilli(int64(binary.BigEndian.Uint64(rest[1:])))
	return l, true
}

// leaseTTL is how long a lease lives unless renewed: three operation
// timeouts, at least three seconds. The holder renews it every third.
func (q *queue) leaseTTL() time.Duration {
	return max(3*time.Duration(q.s.cfg.Timeout), 3*time.Second)
}

// lease is the wake lane's lease, held.
type lease struct {
	q   *queue
	rev uint64
}

// leaseValue is a sealed lease record, stamped with the time.
func (q *queue) leaseValue(state byte) []byte {
	v := append([]byte{state}, q.s.node...)
	v = append(v, 0, leaseVersion)
	v = binary.BigEndian.AppendUint64(v, uint64(time.Now().UnixMilli()))
	return q.s.seal(v, sealLease, q.s.n.lanes, leaseKey)
}

// leaseState reads the lease record of e: its state, holder and whether
// this node may take it: a lease that does not open, is malformed or is a
// replay (stored later than its write time allows, or without a write
// time once every node stamps one; counted) is free; one of a newer
// release is kept as held (its TTL ends it).
func (q *queue) leaseState(e jetstream.KeyValueEntry) (state byte, holder string) {
	v, ok := q.s.open(e.Value(), sealLease, q.s.n.lanes, leaseKey)
	if !ok {
		return 0, ""
	}
	l, ok := parseLease(v)
	skew, timeout := time.Duration(q.s.cfg.ClockSkew), time.Duration(q.s.cfg.Timeout)
	switch {
	case !ok:
		return 0, ""
	case l.version > leaseVersion:
		q.s.newer(version.StoreLease, l.version, e.Revision(), zap.String("bucket", q.s.n.lanes))
		return leaseHeld, newerNode
	case l.version == leaseVersion && !cluster.Fresh(l.written, e.Created(), skew, timeout),
		l.version == 1 && q.s.gate.AtLeast(cluster.LevelFreshRecords):
		q.s.p.Metrics.Replayed(cluster.ReplayedLease, 1)
		return 0, ""
	}
	return l.state, l.node
}

// acquireLease waits until this node holds the wake lane's lease; clean
// reports that the previous holder handed it over (or that none had it
// and nothing is in flight), so delivery may start at once.
func (q *queue) acquireLease(ctx context.Context) (*lease, bool, error) {
	wait := min(q.leaseTTL()/3, time.Second)
	for {
		if l, handedOver, err := q.tryLease(ctx); err == nil && l != nil {
			return l, handedOver, nil
		} else if err != nil && ctx.Err() != nil {
			return nil, false, err
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// tryLease takes the lease if it is free: absent (expired, or never
// taken), released, or not sealed by a node of this cluster.
func (q *queue) tryLease(ctx context.Context) (*lease, bool, error) {
	kv := q.lanes.Load()
	if kv == nil || !q.s.up() {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(q.s.cfg.Timeout))
	defer cancel()
	e, err := kv.Get(ctx, leaseKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err := kv.Create(ctx, leaseKey, q.leaseValue(leaseHeld))
		if err != nil {
			return nil, false, err
		}
		return &lease{q: q, rev: rev}, q.nothingInFlight(ctx), nil
	case err != nil:
		return nil, false, err
	}
	state, holder := q.leaseState(e)
	if state == leaseHeld && holder != q.s.node {
		return nil, false, nil // another node holds it
	}
	rev, err := kv.Update(ctx, leaseKey, q.leaseValue(leaseHeld), e.Revision())
	if err != nil {
		return nil, false, err
	}
	return &lease{q: q, rev: rev}, state == leaseReleased || q.nothingInFlight(ctx), nil
}

// nothingInFlight reports whether no wake event is delivered and not yet
// acknowledged (to anyone).
func (q *queue) nothingInFlight(ctx context.Context) bool {
	c, err := q.s.js.Consumer(ctx, q.s.n.queue, consumerWake)
	if err != nil {
		return false
	}
	info, err := c.Info(ctx)
	return err == nil && info.NumAckPending == 0
}

// keep renews the lease every third of its TTL until ctx ends; it calls
// lost when a renewal fails (another node may take the lease once it
// expires, so this one must stop first).
func (l *lease) keep(ctx context.Context, lost func()) {
	t := time.NewTicker(l.q.leaseTTL() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kv := l.q.lanes.Load()
		rctx, cancel := context.WithTimeout(ctx, time.Duration(l.q.s.cfg.Timeout))
		rev, err := kv.Update(rctx, leaseKey, l.q.leaseValue(leaseHeld), l.rev)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				l.q.s.log.Warn("cluster: wake lane lease lost; this node stops delivering wake events", zap.Error(err))
			}
			lost()
			return
		}
		l.rev = rev
	}
}

// release marks the lease released, so that the next holder starts at
// once (best effort: if it fails the lease expires by itself).
func (l *lease) release() {
	kv := l.q.lanes.Load()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.q.s.cfg.Timeout))
	defer cancel()
	_, _ = kv.Update(ctx, leaseKey, l.q.leaseValue(leaseReleased), l.rev)
}

// wakeLane serves the wake lane from this node while it holds the lease,
// until ctx ends.
func (q *queue) wakeLane(ctx context.Context) {
	defer q.running.Done()
	changed := make(chan struct{}, 1)
	stopState := q.s.hub.watch(func(bool) { signal(changed) }, q.s.up())
	defer stopState()
	for ctx.Err() == nil {
		if !q.s.up() {
			select {
			case <-ctx.Done():
			case <-changed:
			case <-time.After(time.Second):
			}
			continue
		}
		l, clean, err := q.acquireLease(ctx)
		if err != nil {
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		kept := make(chan struct{})
		go func() { defer close(kept); l.keep(lctx, cancel) }()
		if !clean {
			// the previous holder's unacknowledged wake events come back
			// after ack_wait: they go first
			select {
			case <-lctx.Done():
			case <-time.After(q.qp.AckWait + time.Second):
			}
		}
		handedOver := q.deliverWakes(lctx)
		stopped := ctx.Err() != nil
		cancel()
		<-kept // no renewal races the release
		if handedOver {
			l.release()
		}
		if !stopped {
			select { // a lost lease: another node may hold it now
			case <-ctx.Done():
			case <-time.After(q.leaseTTL() / 3):
			}
		}
	}
}

// wakeHeld is the wake events fetched and not yet delivered, kept alive
// at the server while they wait.
type wakeHeld struct {
	mu   sync.Mutex
	msgs []jetstream.Msg
}

// deliverWakes delivers wake events in order while ctx lasts. It returns
// whether it gave back, in order, what it held (a clean hand-over).
func (q *queue) deliverWakes(ctx context.Context) bool {
	cons, err := q.s.js.Consumer(ctx, q.s.n.queue, consumerWake)
	if err != nil {
		return true
	}
	held := &wakeHeld{}
	stopKeep := make(chan struct{})
	defer close(stopKeep)
	go held.keepAlive(max(q.qp.AckWait/3, 10*time.Millisecond), stopKeep)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(wakeBatch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() == nil && !q.s.up() {
				return false
			}
			continue
		}
		q.deliverBatch(ctx, batch.Messages(), held)
	}
	return held.giveBack()
}

// deliverBatch delivers the wake events of one fetch in order as they
// arrive, holding (and keeping alive) those that wait their turn; when
// ctx ends it still takes in the rest of the fetch (at most its one
// second), so that giving back returns every one of them.
func (q *queue) deliverBatch(ctx context.Context, msgs <-chan jetstream.Msg, held *wakeHeld) {
	for {
		for drained := false; !drained && msgs != nil; { // whatever has arrived
			select {
			case m, ok := <-msgs:
				if !ok {
					msgs = nil
				} else {
					held.push(m)
				}
			default:
				drained = true
			}
		}
		m := held.next()
		switch {
		case msgs == nil && (m == nil || ctx.Err() != nil):
			return
		case m == nil || ctx.Err() != nil:
			if m, ok := <-msgs; ok {
				held.push(m)
			} else {
				msgs = nil
			}
			continue
		}
		q.deliverWake(ctx, m)
		if ctx.Err() == nil {
			held.pop()
		}
	}
}

// deliverWake delivers one wake event, retrying it in place until it is
// delivered, refused (dead letter), past max_age or ctx ends.
func (q *queue) deliverWake(ctx context.Context, m jetstream.Msg) {
	ev, meta, ok := q.open(m)
	if !ok {
		return
	}
	ev.Attempts = int(meta.NumDelivered) - 1
	for ctx.Err() == nil {
		var done func(bool)
		if lim := q.paced(); lim != nil {
			var err error
			if done, err = lim.Acquire(ctx); err != nil {
				return
			}
		}
		r, ok := q.sendHeld(ctx, m, ev)
		if done != nil {
			done(ok)
		}
		if !ok {
			// No sender: this node is stopping (setSender ends ctx next).
			// m stays held and goes back in order with the rest; a nak
			// here would have the server redeliver it into this node's
			// fetch, still open, behind the later ones, and the next
			// holder would send it after them.
			<-ctx.Done()
			return
		}
		switch spool.Classify(r.status, r.err) {
		case spool.OutcomeDone:
			q.repeats.forget(ev.ID)
			q.ack(m, ev, false)
			return
		case spool.OutcomeDead:
			q.repeats.forget(ev.ID)
			ev.Attempts++
			q.bury(m, meta, ev, r.status, r.deadReason())
			return
		case spool.OutcomeRetry: // below
		}
		if ctx.Err() != nil {
			return
		}
		if q.identical(m, meta, ev, r) {
			return
		}
		q.failed(ev.ID, r)
		delay := q.retryDelay(ev, r)
		ev.Attempts++
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if q.expired(m, meta, ev) {
			return
		}
	}
}

// push adds a fetched message.
func (h *wakeHeld) push(m jetstream.Msg) {
	h.mu.Lock()
	h.msgs = append(h.msgs, m)
	h.mu.Unlock()
}

// next is the oldest held message (nil: none).
func (h *wakeHeld) next() jetstream.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) == 0 {
		return nil
	}
	return h.msgs[0]
}

// pop drops the oldest held message (handled).
func (h *wakeHeld) pop() {
	h.mu.Lock()
	h.msgs = h.msgs[1:]
	h.mu.Unlock()
}

// keepAlive tells the server every interval that the held messages are
// being worked on, until stop.
func (h *wakeHeld) keepAlive(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		msgs := append([]jetstream.Msg(nil), h.msgs...)
		h.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// giveBack returns the held messages to the queue, oldest first, so that
// the next holder gets them in order; it reports whether every one went.
func (h *wakeHeld) giveBack() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := true
	for _, m := range h.msgs {
		if err := m.Nak(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			ok = false
		}
	}
	h.msgs = nil
	return ok
}
