package spool

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// Sender delivers one event. It returns the gateway HTTP status (0 when no
// response), a short reason (e.g. the gateway's error text) and an error for
// network failures. The store classifies: 2xx done; 408, 425, 429, 5xx, 0 or
// a non-nil error retry; any other status dead-letters with the reason.
type Sender interface {
	Send(ctx context.Context, ev *Event) (status int, reason string, err error)
}

// Holder is a Sender that also says how long its owner's pauses held
// deliveries since a time: a queue that decides max_age elsewhere (the
// cluster's) does not count that time, as the Store does not.
type Holder interface {
	HeldSince(from time.Time) time.Duration
}

// Expirer is a Sender that is told when an event it would have delivered
// went to the dead letters past max_age (with the reason ReasonExpired),
// so that what it reported of the event (e.g. an event log's "retrying")
// does not stay its last word.
type Expirer interface {
	Expired(ev *Event)
}

// TellExpired tells snd, when it is an Expirer, that ev expired.
func TellExpired(snd Sender, ev *Event) {
	if x, ok := snd.(Expirer); ok {
		x.Expired(ev)
	}
}

// Burier is a Sender that is told when an event went to the dead letters
// after the same answer MaxIdentical times in a row (its last attempt
// reported a retry), with the dead letter's reason.
type Burier interface {
	Buried(ev *Event, reason string)
}

// TellBuried tells snd, when it is a Burier, that ev was dead-lettered
// with reason.
func TellBuried(snd Sender, ev *Event, reason string) {
	if x, ok := snd.(Burier); ok {
		x.Buried(ev, reason)
	}
}

// senderBox lets an interface value live in an atomic.Pointer.
type senderBox struct{ Sender }

// maxReasonLen bounds the failure text stored with an event.
const maxReasonLen = 256

// reasonExpired is the dead-letter reason for events older than MaxAge.
const reasonExpired = "expired: older than max_age"

// outcome is what a send's result means for the event.
type outcome int

const (
	outcomeRetry outcome = iota
	outcomeDone
	outcomeDead
)

// classify maps a Sender result to an outcome.
func classify(status int, err error) outcome {
	switch {
	case err != nil:
		return outcomeRetry
	case status >= 200 && status < 300:
		return outcomeDone
	case status == 0, status >= 500 && status < 600,
		status == 408, status == 425, status == 429:
		return outcomeRetry
	default:
		return outcomeDead
	}
}

// SetSender installs (or replaces, on config reload) the sender and starts
// the workers if they are not running. A nil sender pauses delivery. It does
// nothing after Close.
func (s *Store) SetSender(snd Sender) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if snd == nil {
		s.sender.Store(nil)
	} else {
		s.sender.Store(&senderBox{snd})
	}
	if s.ctx.Err() != nil {
		return
	}
	if snd != nil && !s.started {
		s.started = true
		s.workers.Add(1)
		go s.work(s.idx.wake, s.wakeSig, false)
		s.startAgentWorkers()
	}
	nudge(s.wakeSig)
	nudge(s.agentSig)
}

// startAgentWorkers starts the agent-lane workers the config asks for
// beyond those running. Called with s.mu held.
func (s *Store) startAgentWorkers() {
	n := s.cfg.agentWorkers() - s.agentActive
	if n <= 0 {
		return
	}
	s.agentActive += n
	s.workers.Add(n)
	for range n {
		go s.work(s.idx.agent, s.agentSig, true)
	}
}

// Reconfigure applies the settings of c that a running store can change
// (MaxBytes, MaxAge, RetryInitial, RetryMax, Workers, MaxIdentical), as a config reload
// does, and logs each change; Dir and LockTimeout stay the store's own. c
// must be valid (Validate). New backoffs use the new bounds; fewer
// workers leave as they finish their current delivery.
func (s *Store) Reconfigure(c Config) {
	c = c.withDefaults()
	s.mu.Lock()
	old := s.cfg
	s.cfg.MaxBytes, s.cfg.MaxAge, s.cfg.RetryInitial, s.cfg.RetryMax, s.cfg.Workers, s.cfg.MaxIdentical =
		c.MaxBytes, c.MaxAge, c.RetryInitial, c.RetryMax, c.Workers, c.MaxIdentical
	if s.started && s.ctx.Err() == nil {
		s.startAgentWorkers()
	}
	cur := s.cfg
	s.mu.Unlock()
	for _, f := range []struct {
		name     string
		old, new any
	}{
		{"max_bytes", old.MaxBytes, cur.MaxBytes}, {"max_age", old.MaxAge, cur.MaxAge},
		{"retry_initial", old.RetryInitial, cur.RetryInitial}, {"retry_max", old.RetryMax, cur.RetryMax},
		{"workers", old.Workers, cur.Workers}, {"max_identical_errors", old.MaxIdentical, cur.MaxIdentical},
	} {
		if f.old != f.new {
			s.log.Info("spool: setting changed by the new config", zap.String("path", s.path), zap.String("setting", f.name),
				zap.Any("from", f.old), zap.Any("to", f.new))
		}
	}
	nudge(s.wakeSig)
	nudge(s.agentSig)
}

// retire reports whether an agent-lane worker should stop because the
// config now asks for fewer; its wake-up signal passes on to a sibling.
func (s *Store) retire(agent bool, sig chan struct{}) bool {
	if !agent {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agentActive <= s.cfg.agentWorkers() {
		return false
	}
	s.agentActive--
	nudge(sig)
	return true
}

// SetRate limits deliveries to r (the zero Rate: no limit) from now on.
// The start times of recent sends are kept, so setting the same rate again
// (a config reload) does not open a fresh window.
func (s *Store) SetRate(r Rate) {
	s.mu.Lock()
	s.sends.setRate(r)
	s.mu.Unlock()
	nudge(s.wakeSig)
	nudge(s.agentSig)
}

// work is one delivery goroutine serving l until Close (an agent-lane
// worker also until Reconfigure asks for fewer).
func (s *Store) work(l lane, sig chan struct{}, agent bool) {
	defer s.workers.Done()
	for s.ctx.Err() == nil && !s.retire(agent, sig) {
		it, wait := s.next(l, sig)
		if it != nil {
			s.deliver(l, sig, it)
			continue
		}
		if !s.sleep(sig, wait) {
			return
		}
	}
}

// sleep waits for a signal, wait (negative: no timeout) or Close; it
// reports false on Close.
func (s *Store) sleep(sig chan struct{}, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-s.ctx.Done():
		return false
	case <-sig:
	case <-timeout:
	}
	return true
}

// next takes an item from l, or says how long to wait: while no sender is
// installed, delivery is paused or the gateway is deemed unreachable,
// nothing is handed out, and the rate limit spaces what is.
func (s *Store) next(l lane, sig chan struct{}) (*item, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sender.Load() == nil || s.paused {
		return nil, -1
	}
	now := time.Now()
	if now.Before(s.pauseUntil) {
		return nil, s.pauseUntil.Sub(now)
	}
	if wait := s.sends.wait(now); wait > 0 {
		return nil, wait
	}
	it, wait := l.take(now)
	if it != nil {
		s.sends.record(now)
		s.inFlight++
		if l.ready(now) {
			nudge(sig) // more work: wake a sibling
		}
	}
	return it, wait
}

// deliver sends one in-flight item and settles it.
func (s *Store) deliver(l lane, sig chan struct{}, it *item) {
	ev, err := s.loadQueued(it.seq)
	if err != nil {
		s.log.Error("spool: queued event unreadable; skipped until restart", zap.Uint64("seq", it.seq), zap.Error(err))
		s.mu.Lock()
		s.idx.forget(it)
		s.inFlight--
		s.mu.Unlock()
		nudge(sig)
		return
	}
	ev.Seq = it.seq
	ev.Attempts = it.attempts
	now := time.Now()
	s.mu.Lock()
	expired := now.After(s.expiry(it.firstSeen, now)) // the operator's pauses do not count
	s.mu.Unlock()
	if expired {
		s.bury(sig, it, ev, 0, ExpiredReason(it.attempts, ev.LastError))
		if box := s.sender.Load(); box != nil {
			TellExpired(box.Sender, ev)
		}
		return
	}
	box := s.sender.Load()
	if box == nil {
		s.abandon(sig, l, it)
		return
	}
	status, reason, err := s.send(box.Sender, ev)
	out := classify(status, err)
	if out != outcomeDone && s.ctx.Err() != nil {
		s.abandon(sig, l, it) // closing: leave it for the next start
		return
	}
	switch out {
	case outcomeDone:
		s.complete(sig, it)
	case outcomeDead:
		ev.Attempts++
		s.bury(sig, it, ev, status, clip(fmt.Sprintf("gateway status %d: %s", status, reason)))
	default:
		var why string
		if err != nil {
			why = "send: " + err.Error()
		} else {
			why = fmt.Sprintf("gateway status %d: %s", status, reason)
		}
		why = clip(why)
		if n := s.identical(it, err == nil && Repeatable(status), why); n > 0 {
			ev.Attempts++
			dead := IdenticalReason(why, n)
			s.bury(sig, it, ev, status, dead)
			TellBuried(box.Sender, ev, dead)
			return
		}
		s.reschedule(sig, l, it, ev, status, why)
	}
}

// identical counts it's identical Repeatable answers in a row (why, this
// attempt's reason, against the previous attempt's, kept on the item as a
// hash: the stored record's last error may not be written yet when the
// next attempt reads it) and returns their number once it reaches
// MaxIdentical, else 0. The count is kept in memory: a restart begins it
// again (max_age still bounds the event).
func (s *Store) identical(it *item, repeatable bool, why string) int {
	h := maphash.String(s.whySeed, why)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !repeatable:
		it.identical, it.lastWhy = 0, 0
	case it.identical > 0 && h == it.lastWhy:
		it.identical++
	default:
		it.identical, it.lastWhy = 1, h
	}
	if it.identical >= s.cfg.MaxIdentical {
		return it.identical
	}
	return 0
}

// send calls snd, turning a panic into a retryable failure.
func (s *Store) send(snd Sender, ev *Event) (status int, reason string, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("spool: sender panicked", zap.String("id", ev.ID), zap.ByteString("stack", debug.Stack()))
			status, reason, err = 0, "", fmt.Errorf("sender panicked")
		}
	}()
	return snd.Send(s.ctx, ev)
}

// loadQueued reads a queued event.
func (s *Store) loadQueued(seq uint64) (*Event, error) {
	var ev *Event
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(queueBucket).Get(seqKey(seq))
		if v == nil {
			return fmt.Errorf("seq %d not in queue", seq)
		}
		var err error
		ev, err = decodeEvent(v)
		return err
	})
	return ev, err
}

// responded records that the gateway answered (status != 0), which ends any
// unreachable pause. Called with s.mu held.
func (s *Store) responded(status int) {
	if status == 0 {
		return
	}
	resumed := !s.pauseUntil.IsZero()
	s.netFailures = 0
	s.pauseUntil = time.Time{}
	if resumed {
		nudge(s.wakeSig)
		nudge(s.agentSig)
	}
}

// complete removes a delivered item.
func (s *Store) complete(sig chan struct{}, it *item) {
	s.mu.Lock()
	s.idx.forget(it)
	s.inFlight--
	s.bytes -= it.size
	s.responded(200)
	s.mu.Unlock()
	s.delivered.Add(1)
	s.ops <- &deleteOp{seq: it.seq, size: it.size}
	nudge(sig)
}

// bury moves an item to the dead letters with reason (status 0: expired).
func (s *Store) bury(sig chan struct{}, it *item, ev *Event, status int, reason string) {
	ev.LastError = reason
	val := encodeEvent(ev)
	s.mu.Lock()
	s.idx.forget(it)
	s.inFlight--
	delta := recordSize(val) - it.size
	s.bytes += delta
	s.deadDepth++
	s.responded(status)
	s.mu.Unlock()
	s.deadLetters.Add(1)
	s.log.Warn("spool: event dead-lettered",
		zap.String("id", ev.ID), zap.String("kind", ev.Kind), zap.Int("status", status),
		zap.Int("attempts", ev.Attempts), zap.Bool("expired", IsExpired(reason)))
	s.ops <- &buryOp{seq: it.seq, val: val, delta: delta}
	nudge(sig)
}

// reschedule records a failed attempt and queues the item again after its
// backoff, never later than its expiry. A send that got no response also
// pauses all sending for a backoff that grows with consecutive such failures.
func (s *Store) reschedule(sig chan struct{}, l lane, it *item, ev *Event, status int, reason string) {
	now := time.Now()
	s.mu.Lock()
	it.attempts++
	next := now.Add(backoff(s.cfg.RetryInitial, s.cfg.RetryMax, it.attempts, s.rnd))
	if exp := s.expiry(it.firstSeen, now); next.After(exp) {
		next = exp
	}
	it.nextTry = next
	attempts := it.attempts
	ev.Attempts, ev.NextTry, ev.LastError = it.attempts, next, reason
	val := encodeEvent(ev)
	s.bytes += recordSize(val) - it.size
	it.size = recordSize(val)
	l.release(it)
	s.inFlight--
	if status == 0 {
		if !now.Before(s.pauseUntil) {
			s.netFailures++
			s.pauseUntil = now.Add(backoff(s.cfg.RetryInitial, s.cfg.RetryMax, s.netFailures, s.rnd))
		}
	} else {
		s.responded(status)
	}
	s.mu.Unlock()
	s.retries.Add(1)
	s.log.Debug("spool: delivery failed; will retry",
		zap.String("id", ev.ID), zap.Int("status", status), zap.Int("attempts", attempts), zap.Time("next_try", next))
	s.ops <- &updateOp{seq: it.seq, val: val}
	nudge(sig)
}

// abandon returns an in-flight item untouched (no attempt is counted).
func (s *Store) abandon(sig chan struct{}, l lane, it *item) {
	s.mu.Lock()
	l.release(it)
	s.inFlight--
	s.mu.Unlock()
	nudge(sig)
}

// clip bounds a stored reason to maxReasonLen bytes of valid UTF-8 on one line.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > maxReasonLen {
		s = s[:maxReasonLen]
	}
	return strings.ToValidUTF8(s, "")
}
