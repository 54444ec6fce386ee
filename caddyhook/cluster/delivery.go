package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// Delivery health: what one delivery node does (DeliveryTracker, its
// DeliveryFacts) and what that means (DeliveryState), so that "delivery
// running" is said only while some node makes progress. A node is
// stalled when the queue holds events and it has made no progress for
// ack_wait: no attempt finished, and it was not waiting for work (its
// lanes subscribed, nothing in flight). A node that does not answer (a
// frozen or killed process, a node cut off) is judged from what was last
// heard of it.

// Delivery states of a node.
const (
	DeliveryDelivering   = "delivering"    // attempts finish, or it waits for events that are due later
	DeliveryIdle         = "idle"          // nothing queued, nothing in flight
	DeliveryPaused       = "paused"        // its operator paused it
	DeliveryStalled      = "stalled"       // events queued, no progress for ack_wait
	DeliveryDisconnected = "disconnected"  // it answers, but cannot reach the engine
	DeliverySilent       = "not answering" // it did not answer in time
)

// Summary states of the cluster's delivery.
const (
	DeliveryRunning = "running" // some delivery node makes progress
	DeliveryNone    = "none"    // no delivery node, nothing queued
)

// DeliveryFacts are what a delivery node tells of itself.
type DeliveryFacts struct {
	// Delivers: a sender is registered here (deliver on), paused or not.
	Delivers bool `json:"delivers"`
	Paused   bool `json:"paused"`
	// Connected: the engine answers this node now.
	Connected bool `json:"connected"`
	// Ready: it waits for work (its lanes are subscribed, nothing in
	// flight): it would take an event at once.
	Ready    bool `json:"ready"`
	InFlight int  `json:"in_flight"`
	Workers  int  `json:"workers"`
	// Progress is when an attempt last finished (delivered, failed, dead
	// lettered, expired); LastSuccess when one was last delivered.
	Progress    time.Time `json:"progress,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	// LastError is the last failed attempt's reason, at LastErrorAt.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Rate is the events delivered per second over the last minute.
	Rate      float64 `json:"rate"`
	Delivered uint64  `json:"delivered"` // since the node started
	Failed    uint64  `json:"failed"`    // failed attempts since the node started
}

// DeliveryTracker records one node's delivery: it wraps the node's
// sender (Wrap). Safe for concurrent use; it is never on the request
// path (only the delivery workers and the admin API use it).
type DeliveryTracker struct {
	inFlight  atomic.Int64
	delivered atomic.Uint64
	failed    atomic.Uint64

	mu          sync.Mutex
	progress    time.Time
	lastSuccess time.Time
	lastError   string
	lastErrorAt time.Time
	steps       [rateSteps]rateStep
}

// The rate covers the last minute in rateSteps steps.
const (
	rateSteps   = 6
	rateStepLen = 10 * time.Second
)

// rateStep counts the deliveries of one step (its number: unix time /
// rateStepLen).
type rateStep struct {
	stamp int64
	n     uint64
}

// Wrap returns snd recording into t (nil: nil).
func (t *DeliveryTracker) Wrap(snd spool.Sender) spool.Sender {
	if snd == nil {
		return nil
	}
	return trackedSender{snd, t}
}

// trackedSender is a sender whose sends a DeliveryTracker records.
type trackedSender struct {
	spool.Sender
	t *DeliveryTracker
}

// Send implements spool.Sender.
func (s trackedSender) Send(ctx context.Context, ev *spool.Event) (int, string, error) {
	s.t.inFlight.Add(1)
	status, reason, err := s.Sender.Send(ctx, ev)
	s.t.inFlight.Add(-1)
	if ctx.Err() == nil { // not the spool or the queue stopping
		s.t.attempt(time.Now(), status, reason, err)
	}
	return status, reason, err
}

// HeldSince implements spool.Holder for the sender it records.
func (s trackedSender) HeldSince(from time.Time) time.Duration {
	if h, ok := s.Sender.(spool.Holder); ok {
		return h.HeldSince(from)
	}
	return 0
}

// Expired implements spool.Expirer: an event expired is progress too.
func (s trackedSender) Expired(ev *spool.Event) {
	s.t.mu.Lock()
	s.t.progress = time.Now()
	s.t.mu.Unlock()
	spool.TellExpired(s.Sender, ev)
}

// Buried implements spool.Burier: an event dead-lettered after the same
// answer max_identical_errors times is progress too.
func (s trackedSender) Buried(ev *spool.Event, reason string) {
	s.t.mu.Lock()
	s.t.progress = time.Now()
	s.t.mu.Unlock()
	spool.TellBuried(s.Sender, ev, reason)
}

// attempt records one finished attempt.
func (t *DeliveryTracker) attempt(now time.Time, status int, reason string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.progress = now
	if err == nil && status >= 200 && status < 300 {
		t.lastSuccess = now
		t.delivered.Add(1)
		step := now.UnixNano() / int64(rateStepLen)
		b := &t.steps[step%rateSteps]
		if b.stamp != step {
			b.stamp, b.n = step, 0
		}
		b.n++
		return
	}
	t.failed.Add(1)
	t.lastErrorAt = now
	t.lastError = AttemptError(status, reason, err)
}

// AttemptError is a failed attempt's reason as the delivery health and
// the dead letters show it: one line, bounded.
func AttemptError(status int, reason string, err error) string {
	if err != nil {
		return safetext.Line("gateway unreachable: " + err.Error())
	}
	if reason = safetext.Line(reason); reason == "" {
		return fmt.Sprintf("gateway status %d", status)
	}
	return safetext.Line(fmt.Sprintf("gateway status %d: %s", status, reason))
}

// Facts returns what t recorded, at now (the caller adds what it knows:
// Delivers, Paused, Connected, Ready, Workers).
func (t *DeliveryTracker) Facts(now time.Time) DeliveryFacts {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := DeliveryFacts{InFlight: int(max(t.inFlight.Load(), 0)), Progress: t.progress, LastSuccess: t.lastSuccess,
		LastError: t.lastError, LastErrorAt: t.lastErrorAt, Delivered: t.delivered.Load(), Failed: t.failed.Load()}
	cur := now.UnixNano() / int64(rateStepLen)
	var n uint64
	for i := range t.steps {
		if b := t.steps[i]; b.stamp > cur-rateSteps && b.stamp <= cur {
			n += b.n
		}
	}
	f.Rate = float64(n) / (rateSteps * rateStepLen).Seconds()
	return f
}

// InFlight is the sends in progress.
func (t *DeliveryTracker) InFlight() int { return int(max(t.inFlight.Load(), 0)) }

// NodeDelivery is one delivery node as the cluster view shows it: what
// it told (or, when it did not answer, last told) and its state.
type NodeDelivery struct {
	Node  string `json:"node"`
	State string `json:"state"`
	// Answered: it answered this time; Heard is when it was last heard
	// from (this answer, or its last answer or announcement).
	Answered bool      `json:"answered"`
	Heard    time.Time `json:"heard,omitzero"`
	// Note says what the state rests on, in words.
	Note string `json:"note,omitempty"`
	DeliveryFacts
}

// QueueHealth is the queue's side of the delivery health.
type QueueHealth struct {
	Depth     uint64        // events queued (in flight and waiting to retry included)
	InFlight  uint64        // handed to a delivery node, not settled (cluster-wide)
	Oldest    time.Duration // age of the oldest queued event (0: none or unknown)
	AckWait   time.Duration // how long a node may hold an event silently
	Known     bool          // the counters could be read
	DeadCount uint64
}

// JudgeDelivery sets n.State (and n.Note) from its facts: answered now
// (heard is when), or last heard of at heard (the facts are then the
// last it told, possibly none), against the queue q at now.
func JudgeDelivery(n *NodeDelivery, q QueueHealth, now time.Time) {
	progress := n.Progress
	if n.Ready && n.Heard.After(progress) {
		progress = n.Heard // waiting for work when it answered
	}
	if !n.Answered && n.Heard.After(progress) {
		progress = n.Heard // it made no progress we know of since it was last heard
	}
	idle := now.Sub(progress).Round(time.Second)
	stalled := q.Known && q.Depth > 0 && q.AckWait > 0 && (progress.IsZero() || now.Sub(progress) >= q.AckWait)
	switch {
	case !n.Answered && stalled:
		n.State, n.Note = DeliveryStalled, fmt.Sprintf("not heard from for %s, %d events queued", now.Sub(n.Heard).Round(time.Second), q.Depth)
	case !n.Answered:
		n.State, n.Note = DeliverySilent, fmt.Sprintf("not heard from for %s", now.Sub(n.Heard).Round(time.Second))
	case n.Paused:
		n.State, n.Note = DeliveryPaused, "paused by its operator"
	case !n.Connected:
		n.State, n.Note = DeliveryDisconnected, "the cluster engine does not answer it"
	case stalled:
		n.State, n.Note = DeliveryStalled, fmt.Sprintf("no progress for %s with %d events queued", idle, q.Depth)
	case n.InFlight == 0 && q.Known && q.Depth == 0:
		n.State, n.Note = DeliveryIdle, "nothing queued"
	default:
		n.State, n.Note = DeliveryDelivering, ""
	}
}

// DeliverySummary is the cluster's delivery in one state and one line.
type DeliverySummary struct {
	State string `json:"state"` // running, paused, stalled, none
	Text  string `json:"text"`
}

// SummarizeDelivery says whether delivery runs: only while some node
// delivers (or idles with nothing queued); else paused, stalled (events
// queued and no node making progress) or none.
func SummarizeDelivery(nodes []NodeDelivery, q QueueHealth) DeliverySummary {
	var running, paused, all int
	for _, n := range nodes {
		all++
		switch n.State {
		case DeliveryDelivering, DeliveryIdle:
			running++
		case DeliveryPaused:
			paused++
		}
	}
	queued := fmt.Sprintf("%d queued", q.Depth)
	if q.Oldest > 0 {
		queued += fmt.Sprintf(", oldest %s", q.Oldest.Round(time.Second))
	}
	if !q.Known {
		queued = "queue unreadable"
	}
	switch {
	case running > 0:
		return DeliverySummary{DeliveryRunning, fmt.Sprintf("delivery running on %d of %d delivery nodes; %s", running, all, queued)}
	case paused > 0 && paused == all:
		return DeliverySummary{DeliveryPaused, fmt.Sprintf("delivery paused on every delivery node; %s", queued)}
	case all == 0 && (!q.Known || q.Depth == 0):
		return DeliverySummary{DeliveryNone, "no delivery node; " + queued}
	case all == 0:
		return DeliverySummary{DeliveryStalled, "delivery stalled: no delivery node; " + queued}
	}
	return DeliverySummary{DeliveryStalled, fmt.Sprintf("delivery stalled: none of %d delivery nodes makes progress; %s", all, queued)}
}
