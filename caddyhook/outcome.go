package caddyhook

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// In a cluster the node that delivers an event, or on which an operator
// retries or drops a dead letter, is seldom the edge that accepted it and
// whose event log holds it: each outcome is applied to this node's log
// and published (cluster.Outcomes, when the engine carries them); every
// node applies the outcomes of the events its log holds. Best effort: an
// outcome published while a node is cut off from the engine is not
// replayed to it.

// nodeName is the name the event log shows for this node's deliveries:
// the cluster engine's node id ("" without a cluster).
func (h *Handler) nodeName() string {
	if h.cluster == nil {
		return ""
	}
	return h.cluster.backend.Node()
}

// outcomeBus is the engine's outcome channel (nil: none).
func (h *Handler) outcomeBus() cluster.Outcomes {
	if h.cluster == nil {
		return nil
	}
	bus, _ := h.cluster.backend.(cluster.Outcomes)
	return bus
}

// noteOutcomes applies outcomes seen on this node now to its event log
// and publishes them to the other nodes. Both get the form the other
// nodes read (normalized), so that this node's own copy, coming back,
// changes nothing.
func (h *Handler) noteOutcomes(items []cluster.Outcome) {
	b := cluster.OutcomeBatch{Node: h.nodeName(), Time: time.Now(), Items: items}
	bus := h.outcomeBus()
	if bus != nil {
		b = b.Normalize()
		if err := bus.PublishOutcomes(b); err != nil {
			h.logger.Debug("cluster: outcome not published", zap.Error(err))
		}
	}
	h.applyOutcomes(b)
}

// applyOutcomes applies a batch of outcomes to the events this node's
// log holds (an outcome of an event not accepted yet waits for it in the
// log, within the log's own bound).
func (h *Handler) applyOutcomes(b cluster.OutcomeBatch) {
	rec := h.evrec
	if rec == nil {
		return
	}
	for _, o := range b.Items {
		rec.log.Update(o.ID, func(d *eventlog.Dispatch) bool { return applyOutcome(d, b.Node, b.Time, o) })
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
	}
	if nd == *d {
		return false
	}
	nd.Updated = at
	*d = nd
	return true
}

// subscribeOutcomes subscribes the handler's event log to the outcomes
// the other nodes publish, until releaseEvents.
func (h *Handler) subscribeOutcomes() error {
	bus := h.outcomeBus()
	if bus == nil || h.evrec == nil {
		return nil
	}
	stop, err := bus.SubscribeOutcomes(h.applyOutcomes)
	if err != nil {
		return fmt.Errorf("cluster: outcomes: %w", err)
	}
	h.evrec.stopOutcomes = stop
	return nil
}
