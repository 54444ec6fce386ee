package caddyhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// In a cluster the node that delivers an event, or on which an operator
// retries or drops a dead letter, is seldom the edge that accepted it and
// whose event log holds it: each outcome is applied to this node's log
// and published (cluster.Outcomes, when the engine carries them); every
// node applies the outcomes of the events its log holds. Best effort: an
// outcome published while a node is cut off from the engine is not
// replayed to it.

// outcomeRelay carries the dispatch outcomes of spooled events, and the
// operators' retries and drops of dead letters, to the event logs: this
// node's (once it has one; none with events off) and, in a cluster, every
// node's through the engine.
type outcomeRelay struct {
	node   string           // this node's name: the cluster engine's node id ("" without a cluster)
	bus    cluster.Outcomes // the engine's outcome channel (nil: none)
	logger *zap.Logger
	log    atomic.Pointer[eventlog.Log] // this node's event log
	// stop ends the subscription to the other nodes' outcomes.
	stop func()
}

// newOutcomeRelay relays through the engine of cs (nil: no cluster).
func newOutcomeRelay(cs *clusterState, logger *zap.Logger) *outcomeRelay {
	r := &outcomeRelay{logger: logger}
	if cs != nil {
		r.node, r.bus = cs.node(), cs.outcomes()
	}
	return r
}

// attach makes l this node's event log and subscribes it to the outcomes
// the other nodes publish, until release.
func (r *outcomeRelay) attach(l *eventlog.Log) error {
	r.log.Store(l)
	if r.bus == nil {
		return nil
	}
	stop, err := r.bus.SubscribeOutcomes(r.apply)
	if err != nil {
		return fmt.Errorf("cluster: outcomes: %w", err)
	}
	r.stop = stop
	return nil
}

// release ends the subscription; nil-safe.
func (r *outcomeRelay) release() {
	if r != nil && r.stop != nil {
		r.stop()
		r.stop = nil
	}
}

// delivery notes a delivery attempt of the spooled event id (its
// attempts so far) that got status, err and the gateway's reply body.
func (r *outcomeRelay) delivery(id string, attempts, status int, err error, reply []byte) {
	o := cluster.Outcome{ID: id, Attempts: attempts + 1, GatewayStatus: status}
	switch spool.Classify(status, err) {
	case spool.OutcomeDone:
		o.State, o.RunID = eventlog.StateDelivered, runID(reply)
	case spool.OutcomeDead:
		o.State, o.Error = eventlog.StateDead, deliveryError(status, err, reply)
	default:
		o.State, o.Error = eventlog.StateRetrying, deliveryError(status, err, reply)
	}
	r.note([]cluster.Outcome{o})
}

// expired notes that the spooled event id went to the dead letters past
// max_age after attempts attempts, for reason (spool.ExpiredReason: with
// the cause of the last failed attempt, when the node that expired it
// made that attempt).
func (r *outcomeRelay) expired(id string, attempts int, reason string) {
	if !spool.IsExpired(reason) {
		reason = spool.ReasonExpired
	}
	r.dead(id, attempts, reason)
}

// dead notes that the spooled event id went to the dead letters after
// attempts attempts, for reason.
func (r *outcomeRelay) dead(id string, attempts int, reason string) {
	r.note([]cluster.Outcome{{ID: id, Attempts: attempts, State: eventlog.StateDead, Error: reason}})
}

// deliveryError is a failed attempt's reason, fit for the console.
func deliveryError(status int, err error, reply []byte) string {
	if err != nil {
		if err == errGatewayTimeout {
			return "gateway timeout"
		}
		return reasonGatewayDown
	}
	return safetext.Line(fmt.Sprintf("gateway status %d: %s", status, reply[:min(len(reply), 200)]))
}

// operator notes an operator's action on dead letters (state: queued for
// a retry, or dropped) in their events.
func (r *outcomeRelay) operator(ids []string, state string) {
	for len(ids) > 0 {
		n := min(len(ids), cluster.MaxOutcomeItems)
		batch := make([]cluster.Outcome, n)
		for i, id := range ids[:n] {
			batch[i] = cluster.Outcome{ID: id, State: state}
		}
		r.note(batch)
		ids = ids[n:]
	}
}

// note applies outcomes seen on this node now to its event log and
// publishes them to the other nodes. Both get the form the other nodes
// read (normalized), so that this node's own copy, coming back, changes
// nothing.
func (r *outcomeRelay) note(items []cluster.Outcome) {
	b := cluster.OutcomeBatch{Node: r.node, Time: time.Now(), Items: items}
	if r.bus != nil {
		b = b.Normalize()
		if err := r.bus.PublishOutcomes(b); err != nil {
			r.logger.Debug("cluster: outcome not published", zap.Error(err))
		}
	}
	r.apply(b)
}

// apply applies a batch of outcomes to the events this node's log holds
// (an outcome of an event not accepted yet waits for it in the log,
// within the log's own bound).
func (r *outcomeRelay) apply(b cluster.OutcomeBatch) {
	l := r.log.Load()
	if l == nil {
		return
	}
	for _, o := range b.Items {
		l.Update(o.ID, func(d *eventlog.Dispatch) bool { return applyOutcome(d, b.Node, b.Time, o) })
	}
}

// applyOutcome changes d by o, seen on node at; it reports whether
// anything changed (the same outcome again changes nothing). A delivered
// event stays delivered: a late report of an earlier attempt, or an
// operator's retry that the delivery overtook, does not undo it; an
// operator's action applies to an event not delivered or dropped.
func applyOutcome(d *eventlog.Dispatch, node string, at time.Time, o cluster.Outcome) bool {
	nd := *d
	switch o.State {
	case eventlog.StateQueued, eventlog.StateDropped:
		if d.State == eventlog.StateDelivered || d.State == eventlog.StateDropped {
			return false
		}
		nd.State = o.State
	default:
		if d.State == eventlog.StateDelivered && o.State != eventlog.StateDelivered {
			return false
		}
		nd.State, nd.Attempts, nd.GatewayStatus, nd.Error, nd.Node = o.State, o.Attempts, o.GatewayStatus, o.Error, node
		if o.State == eventlog.StateDelivered {
			nd.RunID = o.RunID
		}
		if o.State == eventlog.StateDead && spool.IsExpired(o.Error) {
			nd = keepCause(nd, *d)
		}
	}
	if nd == *d {
		return false
	}
	nd.Updated = at
	*d = nd
	return true
}

// keepCause keeps, in the dead dispatch nd of an event that expired, what
// its last failed attempt (as d, before, shows it) told: the gateway's
// status, and the error when the node that expired it did not know it
// (another delivery node made that attempt), so that a dead letter never
// loses what killed it.
func keepCause(nd, d eventlog.Dispatch) eventlog.Dispatch {
	if nd.GatewayStatus == 0 {
		nd.GatewayStatus = d.GatewayStatus
	}
	nd.Attempts = max(nd.Attempts, d.Attempts)
	if d.State == eventlog.StateRetrying && d.Error != "" && !strings.Contains(nd.Error, "; last: ") {
		nd.Error = spool.ExpiredReason(nd.Attempts, d.Error)
	}
	return nd
}

// runIDs reads the n run ids of a fan-out reply ("" where missing).
func runIDs(body []byte, n int) []string {
	out := make([]string, n)
	var r struct {
		RunIDs []string `json:"runIds"`
	}
	if bytes.Contains(body, []byte(`"runIds"`)) && json.Unmarshal(body, &r) == nil {
		copy(out, r.RunIDs)
	}
	return out
}

// runID reads the runId of a reply ("" when it has none: a wake).
func runID(body []byte) string {
	if !bytes.Contains(body, []byte(`"runId"`)) {
		return ""
	}
	var r struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(body, &r)
	return r.RunID
}
