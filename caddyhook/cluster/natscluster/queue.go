package natscluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/version"
)

// A queued event (and a dead letter) is one message whose data is the
// event in the local spool's record format (spool.MarshalEvent: the
// gateway path with its query, the forwarded headers, the trace context,
// the body …), sealed with the cluster's signing key for its subject; the
// only header is Nats-Msg-Id, which deduplicates. The record's first
// byte is its version (spool's); the seal itself never changes, so a
// record of a newer release opens, and is kept (left in the queue, or in
// the dead letters) for a node of that release. Version 0, the unsealed
// messages of a release without signing_key, is read in legacy.go.

// queue is the replicated queue: the work-queue stream, its two delivery
// lanes and the dead-letter stream.
type queue struct {
	s  *shared
	qp cluster.QueueParams

	sender  atomic.Pointer[senderBox]
	limiter atomic.Pointer[limiterBox]
	lanes   atomic.Pointer[kvBox] // the wake lane's lease
	mu      sync.Mutex
	cancel  context.CancelFunc
	running sync.WaitGroup
	workers int

	delivered, redelivered, dead atomic.Uint64
	consuming                    atomic.Int32 // agent lane subscriptions running

	failMu sync.Mutex
	fails  map[string]string // the last failed attempt's reason of the events retried here, by id

	repeats repeatCount // identical answers in a row, by event id
}

// maxFails bounds the failures remembered for the dead letters' causes.
const maxFails = 4096

// failed remembers why ev's attempt failed, for its dead letter's reason
// if it expires (on this node).
func (q *queue) failed(id string, r sendResult) {
	why := cluster.AttemptError(r.status, r.reason, r.err)
	q.failMu.Lock()
	defer q.failMu.Unlock()
	if q.fails == nil {
		q.fails = map[string]string{}
	}
	if _, ok := q.fails[id]; !ok && len(q.fails) >= maxFails {
		for k := range q.fails { // any one: a bound, not a cache
			delete(q.fails, k)
			break
		}
	}
	q.fails[id] = why
}

// settled forgets id's failure and returns it.
func (q *queue) settled(id string) string {
	q.failMu.Lock()
	defer q.failMu.Unlock()
	why := q.fails[id]
	delete(q.fails, id)
	return why
}

// repeatCount counts, per event this node is retrying, the identical
// spool.Repeatable answers in a row (a message that is not rewritten on
// redelivery keeps no count of its own); bounded by maxRepeatEntries.
type repeatCount struct {
	mu sync.Mutex
	m  map[string]repeat
}

type repeat struct {
	why string
	n   int
}

// maxRepeatEntries bounds repeatCount: past it the counts start again
// (max_age still bounds every event).
const maxRepeatEntries = 10000

// note records r's answer for id and returns the number of identical
// Repeatable answers in a row once it reaches limit, else 0.
func (c *repeatCount) note(id string, r sendResult, limit int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.err != nil || !spool.Repeatable(r.status) {
		delete(c.m, id)
		return 0
	}
	if c.m == nil || len(c.m) >= maxRepeatEntries {
		c.m = map[string]repeat{}
	}
	why := r.deadReason()
	p := c.m[id]
	if p.why == why {
		p.n++
	} else {
		p = repeat{why: why, n: 1}
	}
	if p.n >= limit {
		delete(c.m, id)
		return p.n
	}
	c.m[id] = p
	return 0
}

// forget drops id's count (delivered, or dead-lettered).
func (c *repeatCount) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// identical notes a failed send of ev and, when it is the same
// Repeatable answer for the max_identical_errors-th time in a row,
// dead-letters ev with it (telling the sender) and reports true.
func (q *queue) identical(m jetstream.Msg, meta *jetstream.MsgMetadata, ev *spool.Event, r sendResult) bool {
	n := q.repeats.note(ev.ID, r, q.qp.MaxIdentical)
	if n == 0 {
		return false
	}
	ev.Attempts++
	reason := spool.IdenticalReason(r.deadReason(), n)
	q.bury(m, meta, ev, r.status, reason)
	if box := q.sender.Load(); box != nil {
		spool.TellBuried(box.Sender, ev, reason)
	}
	return true
}

type senderBox struct{ spool.Sender }

type limiterBox struct{ cluster.Limiter }

func newQueue(s *shared) *queue {
	qp := *s.p.Queue
	if qp.MaxAge <= 0 {
		qp.MaxAge = spool.DefaultMaxAge
	}
	if qp.RetryInitial <= 0 {
		qp.RetryInitial = spool.DefaultRetryInitial
	}
	if qp.RetryMax < qp.RetryInitial {
		qp.RetryMax = max(qp.RetryInitial, spool.DefaultRetryMax)
	}
	if qp.AckWait <= 0 {
		qp.AckWait = time.Duration(s.cfg.AckWait)
	}
	if qp.MaxIdentical <= 0 {
		qp.MaxIdentical = spool.DefaultMaxIdentical
	}
	return &queue{s: s, qp: qp}
}

// provision creates or updates the streams and consumers.
func (q *queue) provision(ctx context.Context) error {
	n, r := q.s.n, q.s.cfg.Replicas
	maxBytes := q.qp.MaxBytes
	if maxBytes <= 0 {
		maxBytes = -1
	}
	dup := time.Duration(q.s.cfg.DuplicateWindow)
	if _, err := q.s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: n.queue, Description: "caddyhook accepted events awaiting delivery",
		Subjects: []string{n.queueWake, n.queueAgent}, Retention: jetstream.WorkQueuePolicy,
		MaxBytes: maxBytes, Discard: jetstream.DiscardNew, Duplicates: dup,
		Storage: jetstream.FileStorage, Replicas: r,
	}); err != nil {
		return fmt.Errorf("cluster nats: stream %s: %w", n.queue, err)
	}
	if _, err := q.s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: n.deadStream, Description: "caddyhook dead letters",
		Subjects: []string{n.dead}, Retention: jetstream.LimitsPolicy, Duplicates: dup,
		Storage: jetstream.FileStorage, Replicas: r,
	}); err != nil {
		return fmt.Errorf("cluster nats: stream %s: %w", n.deadStream, err)
	}
	lanes, err := q.s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: n.lanes, Description: "caddyhook delivery lane leases", History: 1,
		TTL: q.leaseTTL(), Storage: jetstream.FileStorage, Replicas: r,
	})
	if err != nil {
		return fmt.Errorf("cluster nats: bucket %s: %w", n.lanes, err)
	}
	q.lanes.Store(&kvBox{lanes})
	for _, c := range []struct {
		name, subject string
		inFlight      int
	}{{consumerWake, n.queueWake, wakeBatch}, {consumerAgent, n.queueAgent, maxAgentsInFlight}} {
		if _, err := q.s.js.CreateOrUpdateConsumer(ctx, n.queue, jetstream.ConsumerConfig{
			Durable: c.name, Description: "caddyhook delivery lane " + c.name,
			FilterSubject: c.subject, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: q.qp.AckWait, MaxDeliver: -1, MaxAckPending: c.inFlight,
		}); err != nil {
			return fmt.Errorf("cluster nats: consumer %s on %s: %w", c.name, n.queue, err)
		}
	}
	return nil
}

// Publish implements cluster.QueueStore. A failure is ErrFull or
// ErrUnavailable only when no event can have been stored (the server
// refused them, or they were never sent); ErrUnconfirmed when some were
// sent and not all acknowledged in time.
func (q *queue) Publish(ctx context.Context, evs ...*spool.Event) error {
	if !q.s.up() {
		return cluster.ErrUnavailable
	}
	msgs := make([]*nats.Msg, len(evs))
	for i, ev := range evs {
		if ev == nil || ev.ID == "" || (ev.Kind != spool.KindWake && ev.Kind != spool.KindAgent) {
			return fmt.Errorf("%w: event without id or kind", spool.ErrInvalidEvent)
		}
		msgs[i] = q.encode(ev, q.subject(ev.Kind), ev.ID)
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		if len(msgs) == 1 {
			return struct{}{}, q.publishOne(ctx, msgs[0])
		}
		return struct{}{}, q.publishBatch(ctx, msgs)
	})
	err = publishErr(err)
	q.s.opFailed(err)
	return err
}

// publishOne publishes m. While the servers report its id in process
// (error 10158: another node publishes the same event at this moment) it
// publishes again after a pause: the queue then deduplicates it, or stores
// it if the other publish failed.
func (q *queue) publishOne(ctx context.Context, m *nats.Msg) error {
	pause := 5 * time.Millisecond
	for {
		_, err := q.s.js.PublishMsg(ctx, m)
		if !inProcess(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// publishBatch publishes msgs without waiting for each acknowledgement in
// turn; a message whose id is in process elsewhere is published again.
func (q *queue) publishBatch(ctx context.Context, msgs []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var errs []error
	for _, m := range msgs {
		f, err := q.s.js.PublishMsgAsync(m)
		if err != nil {
			errs = append(errs, err)
			break
		}
		futures = append(futures, f)
	}
	sent, stored := len(futures), 0
	for i, f := range futures {
		var err error
		select {
		case <-f.Ok():
		case err = <-f.Err():
		case <-ctx.Done():
			err = ctx.Err()
		}
		if inProcess(err) {
			err = q.publishOne(ctx, msgs[i])
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			stored++
		}
	}
	return batchErr(len(msgs), sent, stored, errs)
}

// batchErr is the outcome of a batch of n messages of which sent were
// handed to the connection and stored acknowledged: a refusal of the
// whole batch only when none was stored and each failure was certain.
func batchErr(n, sent, stored int, errs []error) error {
	if stored == n {
		return nil
	}
	for _, err := range errs {
		if err = publishErr(err); stored > 0 || errors.Is(err, cluster.ErrUnconfirmed) {
			return fmt.Errorf("%w: %d of %d events acknowledged (%d sent): %w", cluster.ErrUnconfirmed, stored, n, sent,
				errors.Join(errs...))
		}
	}
	return publishErr(errs[0])
}

// inProcess reports the servers' "duplicate message id is in process"
// (10158): a publish of the same id by another node is being stored.
func inProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.ErrorCode(10158)
}

// publishErr maps a publish failure to ErrFull or ErrUnavailable when the
// event was certainly not stored (the servers refused it, nobody serves
// the stream, or it was never sent), else to ErrUnconfirmed: sent, and not
// acknowledged in time (or unreadably, or the connection closed while
// waiting), so it may be in the queue.
func publishErr(err error) error {
	if err == nil || errors.Is(err, cluster.ErrUnconfirmed) || errors.Is(err, cluster.ErrUnavailable) ||
		errors.Is(err, cluster.ErrFull) || errors.Is(err, cluster.ErrTooLarge) {
		return err // classified already (a batch)
	}
	s := err.Error()
	if errors.Is(err, nats.ErrMaxPayload) || strings.Contains(s, "message size exceeds maximum allowed") {
		// the servers' max_payload (or the stream's max_msg_size): never
		// stored, and never will be
		return fmt.Errorf("%w: %w", cluster.ErrTooLarge, err)
	}
	if strings.Contains(s, "maximum bytes exceeded") || strings.Contains(s, "maximum messages exceeded") ||
		strings.Contains(s, "resource limits exceeded") {
		return fmt.Errorf("%w: %w", cluster.ErrFull, err)
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr), errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrInvalidConnection),
		errors.Is(err, nats.ErrBadSubject):
		return fmt.Errorf("%w: %w", cluster.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", cluster.ErrUnconfirmed, err)
}

func (q *queue) subject(kind string) string {
	if kind == spool.KindWake {
		return q.s.n.queueWake
	}
	return q.s.n.queueAgent
}

// encode turns an event into a sealed message on subject, deduplicated
// by msgID.
func (q *queue) encode(ev *spool.Event, subject, msgID string) *nats.Msg {
	if ev.FirstSeen.IsZero() {
		c := *ev
		c.FirstSeen = time.Now()
		ev = &c
	}
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	m.Data = q.s.seal(spool.MarshalEvent(ev), sealKind(subject, q.s.n.dead), subject)
	return m
}

// sealKind is the seal context of a message on subject.
func sealKind(subject, dead string) string {
	if subject == dead {
		return sealDead
	}
	return sealQueue
}

// errUnsealed: a message that does not open with the cluster's keys.
var errUnsealed = errors.New("not sealed with the cluster's signing key")

// newerRedelivery is how long a queued event of a newer release waits
// before it is offered again: it stays in the queue for a delivery node
// of that release.
const newerRedelivery = 30 * time.Second

// decode opens a message read from subject (with header h) and reads its
// event: an event of the subject's lane, its first-seen time no later
// than the server's time of the message (stored) plus the clock skew. A
// message of a release without signing_key (version 0) is read while
// accept_unsealed_until lasts; an event of a newer release is an error
// for which spool.NewerVersion reports its version.
func (q *queue) decode(subject string, h nats.Header, data []byte, stored time.Time) (*spool.Event, error) {
	var ev *spool.Event
	var err error
	if b, ok := q.s.open(data, sealKind(subject, q.s.n.dead), subject); ok {
		ev, err = spool.UnmarshalEvent(b)
	} else if q.s.acceptUnsealed() && isLegacy(h) {
		ev, err = decodeLegacy(h, data)
		if err == nil && subject == q.s.n.dead {
			if inner := q.restoreKept(ev); inner != nil {
				ev = inner
			}
		}
	} else {
		return nil, errUnsealed
	}
	if err != nil {
		return nil, err
	}
	if subject != q.s.n.dead && q.subject(ev.Kind) != subject {
		return nil, fmt.Errorf("%w: a %s event on %s", spool.ErrInvalidEvent, ev.Kind, subject)
	}
	if limit := stored.Add(time.Duration(q.s.cfg.ClockSkew)); !stored.IsZero() && ev.FirstSeen.After(limit) {
		ev.FirstSeen = limit
	}
	return ev, nil
}

// SetSender implements cluster.QueueStore.
func (q *queue) SetSender(snd spool.Sender, workers int) { q.setSender(snd, workers) }

// SetLimiter implements cluster.QueueStore.
func (q *queue) SetLimiter(l cluster.Limiter) {
	if l == nil {
		q.limiter.Store(nil)
		return
	}
	q.limiter.Store(&limiterBox{l})
}

// paced returns the limiter when it limits now.
func (q *queue) paced() cluster.Limiter {
	if b := q.limiter.Load(); b != nil && b.Limited() {
		return b.Limiter
	}
	return nil
}

// setSender starts, retargets or stops the delivery lanes.
func (q *queue) setSender(snd spool.Sender, workers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if snd == nil {
		q.sender.Store(nil)
		q.stopLocked()
		return
	}
	workers = max(workers, 2)
	q.sender.Store(&senderBox{snd})
	if q.cancel != nil && q.workers == workers {
		return
	}
	q.stopLocked()
	select {
	case <-q.s.closing:
		return
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel, q.workers = cancel, workers
	q.running.Add(2)
	go q.wakeLane(ctx)
	go q.lane(ctx, consumerAgent, workers-1)
}

func (q *queue) stopLocked() {
	if q.cancel != nil {
		q.cancel()
		q.cancel = nil
		q.running.Wait()
	}
}

// lane feeds one consumer's messages to n workers until ctx ends,
// resubscribing after every interruption.
func (q *queue) lane(ctx context.Context, name string, n int) {
	defer q.running.Done()
	changed := make(chan struct{}, 1)
	stopState := q.s.hub.watch(func(bool) { signal(changed) }, q.s.up())
	defer stopState()
	wait := 250 * time.Millisecond
	for ctx.Err() == nil {
		if q.s.up() {
			if err := q.consume(ctx, name, n); err == nil || ctx.Err() != nil {
				wait = 250 * time.Millisecond
				continue
			} else {
				q.s.log.Debug("cluster delivery lane interrupted", zap.String("lane", name), zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Second)
		}
	}
}

// errPacing: the rate was set or lifted; the lane subscribes again in
// the other mode.
var errPacing = errors.New("delivery rate changed")

// consume runs one subscription of the lane until it fails or ctx ends:
// a stream of messages while no rate limits this node, else one fetch
// per send its share of the rate allows (a message is fetched only once
// it may be sent: none waits at this node for the rate while its
// ack_wait runs).
func (q *queue) consume(ctx context.Context, name string, n int) error {
	cons, err := q.s.js.Consumer(ctx, q.s.n.queue, name)
	if err != nil {
		return err
	}
	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for m := range work {
				q.handle(ctx, m)
			}
		})
	}
	defer func() { close(work); wg.Wait() }()
	if lim := q.paced(); lim != nil {
		return q.consumePaced(ctx, cons, lim, work)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(n), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return err
	}
	defer it.Stop()
	q.consuming.Add(1)
	defer q.consuming.Add(-1)
	for {
		if q.paced() != nil {
			return errPacing
		}
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		select {
		case work <- m:
		case <-ctx.Done():
			_ = m.Nak()
			return ctx.Err()
		}
	}
}

// consumePaced fetches one message per send the limiter allows and hands
// it to the workers.
func (q *queue) consumePaced(ctx context.Context, cons jetstream.Consumer, lim cluster.Limiter, work chan<- jetstream.Msg) error {
	q.consuming.Add(1)
	defer q.consuming.Add(-1)
	for ctx.Err() == nil {
		if q.paced() == nil {
			return errPacing
		}
		done, err := lim.Acquire(ctx)
		if err != nil {
			return err
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			done(false)
			if ctx.Err() == nil && (errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) ||
				errors.Is(err, context.DeadlineExceeded)) {
				continue
			}
			return err
		}
		select {
		case work <- m:
			done(true)
		case <-ctx.Done():
			done(false)
			_ = m.Nak()
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// handle delivers one message of the agent lane and settles it: ack on
// 2xx, dead letter on a refusal or past max_age, redelivery with backoff
// otherwise (any delivery node may take it then).
func (q *queue) handle(ctx context.Context, m jetstream.Msg) {
	ev, meta, ok := q.open(m)
	if !ok {
		return
	}
	ev.Attempts = int(meta.NumDelivered) - 1
	r, ok := q.send(ctx, m, ev)
	if !ok {
		return
	}
	switch spool.Classify(r.status, r.err) {
	case spool.OutcomeDone:
		q.repeats.forget(ev.ID)
		q.ack(m, ev, true)
	case spool.OutcomeDead:
		q.repeats.forget(ev.ID)
		ev.Attempts++
		q.bury(m, meta, ev, r.status, r.deadReason())
	default:
		if ctx.Err() != nil {
			_ = m.Nak() // stopping: another delivery node takes it now
			return
		}
		if q.identical(m, meta, ev, r) {
			return
		}
		q.failed(ev.ID, r)
		_ = m.NakWithDelay(q.retryDelay(ev, r))
	}
}

// open reads a delivered message's event. A message that is not sealed
// with the cluster's keys is removed unsent, an unreadable one or one past
// max_age goes to the dead letters: ok is false for all of them. (Without
// a sender, send gives the message back, or the wake lane keeps it held.)
func (q *queue) open(m jetstream.Msg) (ev *spool.Event, meta *jetstream.MsgMetadata, ok bool) {
	meta, err := m.Metadata()
	if err != nil {
		_ = m.Nak()
		return nil, nil, false
	}
	ev, err = q.decode(m.Subject(), m.Headers(), m.Data(), meta.Timestamp)
	if errors.Is(err, errUnsealed) {
		q.s.reject(cluster.RejectedQueue, zap.String("subject", m.Subject()), zap.Uint64("seq", meta.Sequence.Stream))
		_ = m.Term() // removes it from the work queue: never delivered
		return nil, nil, false
	}
	if v, newer := spool.NewerVersion(err); newer {
		q.s.newer(version.StoreQueue, v, meta.Sequence.Stream, zap.String("subject", m.Subject()), zap.Uint64("seq", meta.Sequence.Stream))
		_ = m.NakWithDelay(newerRedelivery) // left in the queue for a node of that release
		return nil, nil, false
	}
	if err != nil {
		q.s.log.Error("cluster: unreadable queued message; moved to the dead letters",
			zap.Uint64("seq", meta.Sequence.Stream), zap.Error(err))
		ev = &spool.Event{ID: "unreadable-" + strconv.FormatUint(meta.Sequence.Stream, 10), Kind: spool.KindAgent,
			Path: "?", Body: m.Data(), FirstSeen: meta.Timestamp}
		q.bury(m, meta, ev, 0, "unreadable queued message")
		return nil, nil, false
	}
	ev.Seq = meta.Sequence.Stream
	if q.expired(m, meta, ev) {
		return nil, nil, false
	}
	return ev, meta, true
}

// expiry is when ev expires: max_age after it was accepted, the time the
// node's operator held deliveries (a pause) not counted.
func (q *queue) expiry(ev *spool.Event) time.Time {
	var held time.Duration
	if box := q.sender.Load(); box != nil {
		if h, ok := box.Sender.(spool.Holder); ok {
			held = h.HeldSince(ev.FirstSeen)
		}
	}
	return ev.FirstSeen.Add(q.qp.MaxAge + held)
}

// expired moves an event past max_age to the dead letters, with the
// cause of its last failed attempt when this node made it.
func (q *queue) expired(m jetstream.Msg, meta *jetstream.MsgMetadata, ev *spool.Event) bool {
	if !time.Now().After(q.expiry(ev)) {
		return false
	}
	// the deliveries so far; an attempt's cause is known when this node
	// made it (a node that held the event frozen made none: then it
	// expired older than max_age, and the edges keep the cause they
	// were told)
	ev.Attempts = max(ev.Attempts, int(meta.NumDelivered)-1)
	ev.LastError = spool.ReasonExpired
	if last := q.settled(ev.ID); last != "" {
		ev.LastError = spool.ExpiredReason(ev.Attempts, last)
	}
	q.bury(m, meta, ev, 0, ev.LastError)
	if box := q.sender.Load(); box != nil {
		spool.TellExpired(box.Sender, ev)
	}
	return true
}

// sendResult is what the gateway answered one send.
type sendResult struct {
	status int
	reason string
	err    error
}

// deadReason is the dead letter's reason of a refused send.
func (r sendResult) deadReason() string {
	return spool.Clip(fmt.Sprintf("gateway status %d: %s", r.status, r.reason))
}

// send sends ev to the gateway, telling the server meanwhile that m is
// being worked on; ok is false when there is no sender (m goes back).
func (q *queue) send(ctx context.Context, m jetstream.Msg, ev *spool.Event) (r sendResult, ok bool) {
	if r, ok = q.sendHeld(ctx, m, ev); !ok {
		_ = m.Nak()
	}
	return r, ok
}

// sendHeld is send that leaves m alone when there is no sender: the wake
// lane keeps m held, to give it back in order with the rest (wake.go).
func (q *queue) sendHeld(ctx context.Context, m jetstream.Msg, ev *spool.Event) (r sendResult, ok bool) {
	box := q.sender.Load()
	if box == nil {
		return r, false
	}
	stop := q.keepAlive(m)
	r.status, r.reason, r.err = box.Send(ctx, ev)
	stop()
	return r, true
}

// ack acknowledges a delivered message: waiting for the server's
// confirmation (double), or not (the ordered wake lane, whose next send
// does not wait for it: a lost acknowledgement makes a duplicate, sent
// again with the same Idempotency-Key, never a reordering of first sends).
func (q *queue) ack(m jetstream.Msg, ev *spool.Event, double bool) {
	var err error
	if double {
		actx, cancel := context.WithTimeout(context.Background(), time.Duration(q.s.cfg.Timeout))
		err = m.DoubleAck(actx)
		cancel()
	} else {
		err = m.Ack()
	}
	if err != nil {
		q.s.log.Warn("cluster: delivered but the acknowledgement failed; the event will be redelivered with the same Idempotency-Key",
			zap.String("id", ev.ID), zap.Error(err))
	}
	q.delivered.Add(1)
	q.settled(ev.ID)
}

// retryDelay is the backoff before ev is sent again (never past its
// max_age), logged with the reason of the failed attempt r.
func (q *queue) retryDelay(ev *spool.Event, r sendResult) time.Duration {
	q.redelivered.Add(1)
	delay := spool.Backoff(q.qp.RetryInitial, q.qp.RetryMax, ev.Attempts+1)
	if left := time.Until(q.expiry(ev)); left < delay {
		delay = max(left, 0)
	}
	why := fmt.Sprintf("gateway status %d: %s", r.status, r.reason)
	if r.err != nil {
		why = "send: " + r.err.Error()
	}
	q.s.log.Debug("cluster: delivery failed; will retry", zap.String("id", ev.ID),
		zap.Int("attempts", ev.Attempts+1), zap.Duration("delay", delay), zap.String("reason", spool.Clip(why)))
	return delay
}

// keepAlive tells the server the message is being worked on while the
// gateway takes its time, so it is not redelivered elsewhere meanwhile.
func (q *queue) keepAlive(m jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(max(q.qp.AckWait/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// bury moves a message to the dead letters with reason, then removes it
// from the queue; if the dead letter cannot be written the message is
// redelivered later instead.
func (q *queue) bury(m jetstream.Msg, meta *jetstream.MsgMetadata, ev *spool.Event, status int, reason string) {
	dl := *ev
	dl.LastError, dl.NextTry = reason, time.Time{}
	dm := q.encode(&dl, q.s.n.dead, ev.ID+".dead."+strconv.FormatUint(meta.Sequence.Stream, 10))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(q.s.cfg.Timeout))
	defer cancel()
	if _, err := q.s.js.PublishMsg(ctx, dm); err != nil {
		q.s.log.Warn("cluster: could not write a dead letter; will try again", zap.String("id", ev.ID), zap.Error(err))
		_ = m.NakWithDelay(q.qp.RetryInitial)
		return
	}
	_ = m.DoubleAck(ctx)
	q.dead.Add(1)
	q.settled(ev.ID)
	q.s.log.Warn("cluster: event dead-lettered", zap.String("id", ev.ID), zap.String("kind", ev.Kind),
		zap.Int("status", status), zap.Int("attempts", ev.Attempts), zap.Bool("expired", spool.IsExpired(reason)))
}

// deadLetter is one dead letter and its stream sequence.
type deadLetter struct {
	seq uint64
	ev  *spool.Event
}

// deadLetters reads the dead-letter stream in order; a dead letter that
// does not open with the cluster's keys is dropped from it (and counted).
func (q *queue) deadLetters(ctx context.Context) ([]deadLetter, jetstream.Stream, error) {
	if !q.s.up() {
		return nil, nil, cluster.ErrUnavailable
	}
	st, err := q.s.js.Stream(ctx, q.s.n.deadStream)
	if err != nil {
		return nil, nil, err
	}
	var out []deadLetter
	for seq := st.CachedInfo().State.FirstSeq; ; {
		raw, err := st.GetMsg(ctx, max(seq, 1), jetstream.WithGetMsgSubject(q.s.n.dead))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, st, nil
		}
		if err != nil {
			return nil, nil, err
		}
		ev, derr := q.decode(raw.Subject, raw.Header, raw.Data, raw.Time)
		v, newer := spool.NewerVersion(derr)
		switch {
		case newer:
			// kept for a node of the release that wrote it
			q.s.newer(version.StoreDeadLetter, v, raw.Sequence, zap.String("subject", raw.Subject), zap.Uint64("seq", raw.Sequence))
		case errors.Is(derr, errUnsealed):
			q.s.reject(cluster.RejectedDeadLetter, zap.String("subject", raw.Subject), zap.Uint64("seq", raw.Sequence))
			if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil, nil, err
			}
		case derr != nil:
			q.s.log.Error("cluster: skipping unreadable dead letter", zap.Uint64("seq", raw.Sequence), zap.Error(derr))
		default:
			ev.Seq = raw.Sequence
			out = append(out, deadLetter{raw.Sequence, ev})
		}
		seq = raw.Sequence + 1
	}
}

// DeadLetters implements cluster.QueueStore.
func (q *queue) DeadLetters(ctx context.Context) ([]*spool.Event, error) {
	dls, _, err := q.deadLetters(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*spool.Event, len(dls))
	for i, d := range dls {
		out[i] = d.ev
	}
	return out, nil
}

// selectDead returns the dead letters with these ids (all when none).
func selectDead(dls []deadLetter, ids []string) []deadLetter {
	if len(ids) == 0 {
		return dls
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []deadLetter
	for _, d := range dls {
		if want[d.ev.ID] {
			out = append(out, d)
		}
	}
	return out
}

// eachDead calls fn for the dead letters with these ids (all when none),
// deleting each from the dead letters after fn succeeds; it returns how
// many were handled.
func (q *queue) eachDead(ctx context.Context, ids []string, fn func(d deadLetter) error) (int, error) {
	dls, st, err := q.deadLetters(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range selectDead(dls, ids) {
		if err := fn(d); err != nil {
			return n, err
		}
		if err := st.DeleteMsg(ctx, d.seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// Retry implements cluster.QueueStore: each dead letter goes back to the
// queue, behind everything queued, with max_age counting afresh.
func (q *queue) Retry(ctx context.Context, ids ...string) (int, error) {
	return q.eachDead(ctx, ids, func(d deadLetter) error {
		ev := *d.ev
		ev.FirstSeen, ev.Attempts, ev.LastError = time.Now(), 0, ""
		m := q.encode(&ev, q.subject(ev.Kind), ev.ID+".retry."+strconv.FormatUint(d.seq, 10))
		_, err := q.s.js.PublishMsg(ctx, m)
		return publishErr(err)
	})
}

// Drop implements cluster.QueueStore.
func (q *queue) Drop(ctx context.Context, ids ...string) (int, error) {
	return q.eachDead(ctx, ids, func(deadLetter) error { return nil })
}

// Stats implements cluster.QueueStore.
func (q *queue) Stats(ctx context.Context) (cluster.QueueStats, error) {
	if !q.s.up() {
		return cluster.QueueStats{}, cluster.ErrUnavailable
	}
	var st cluster.QueueStats
	qs, err := q.s.js.Stream(ctx, q.s.n.queue)
	if err != nil {
		return st, err
	}
	info := qs.CachedInfo()
	st.Depth, st.Bytes, st.AckWait = info.State.Msgs, info.State.Bytes, q.qp.AckWait
	if st.Depth > 0 {
		st.Oldest = info.State.FirstTime
	}
	ds, err := q.s.js.Stream(ctx, q.s.n.deadStream)
	if err != nil {
		return st, err
	}
	st.DeadLetters = ds.CachedInfo().State.Msgs
	for _, name := range []string{consumerWake, consumerAgent} {
		c, err := qs.Consumer(ctx, name)
		if err != nil {
			return st, err
		}
		ci := c.CachedInfo()
		st.InFlight += uint64(max(ci.NumAckPending, 0))
		st.Pending += ci.NumPending
	}
	return st, nil
}

// Counters implements cluster.QueueStore.
func (q *queue) Counters() cluster.DeliveryCounters {
	return cluster.DeliveryCounters{Delivered: q.delivered.Load(), Redeliveries: q.redelivered.Load(), DeadLettered: q.dead.Load(),
		Ready: q.consuming.Load() > 0}
}
