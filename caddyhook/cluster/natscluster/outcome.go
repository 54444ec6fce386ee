package natscluster

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/version"
)

// PublishOutcomes implements cluster.Outcomes with a core NATS publish on
// the namespace's outcome subject, sealed (best effort: nothing is
// stored, a node cut off when it is sent never sees it). The message is
// numbered (version 2) once every live node runs at
// cluster.LevelFreshRecords, so that the others drop a replay of it;
// before, it goes in version 1, which older nodes read.
func (h *handle) PublishOutcomes(b cluster.OutcomeBatch) error {
	return h.outcomes.Send(b, h.gate.AtLeast(cluster.LevelFreshRecords), func(msg []byte) error {
		return h.Broadcast(cluster.TopicOutcome, msg)
	})
}

// SubscribeOutcomes implements cluster.Outcomes: a message longer than
// an outcome message can be, one that does not open with the cluster's
// keys and one that cluster.DecodeOutcomes refuses are dropped and
// counted as rejected outcomes; a replay (read before, or older than
// cluster.OutcomeWindow) is dropped and counted as a replayed outcome;
// version 1 is read while a node of a release before v0.9.0 runs (the
// cluster level is 0), and from a node that has just said hello (its own
// gate holds at 0 until it has heard the others: cluster.Gate.Joining).
func (h *handle) SubscribeOutcomes(fn func(cluster.OutcomeBatch)) (func(), error) {
	r := cluster.NewOutcomeReader()
	return h.subscribe(cluster.TopicOutcome, cluster.MaxOutcomeBytes+cluster.TagSize, func(msg []byte) {
		now, skew := time.Now(), h.ClockSkew()
		allowV1 := !h.gate.AtLeast(cluster.LevelFreshRecords)
		if !allowV1 && cluster.OutcomeVersion(msg) == 1 {
			b, err := cluster.DecodeOutcomes(msg, now, skew)
			allowV1 = err == nil && h.gate.Joining(b.Node, b.Time.Add(-skew))
		}
		b, err := r.Read(msg, now, skew, allowV1)
		switch {
		case errors.Is(err, cluster.ErrReplay):
			h.p.Metrics.Replayed(cluster.ReplayedOutcome, 1)
			h.log.Debug("cluster: dropped a replayed outcome message", zap.Error(err))
			return
		case errors.Is(err, cluster.ErrNewerOutcome):
			h.newer(version.StoreOutcome, cluster.OutcomeVersion(msg), 0, zap.String("subject", cluster.TopicOutcome))
			return
		case err != nil:
			h.reject(cluster.RejectedOutcome, zap.String("subject", cluster.TopicOutcome), zap.Error(err))
			return
		}
		fn(b)
	})
}

// Interface guard
var _ cluster.Outcomes = (*handle)(nil)
