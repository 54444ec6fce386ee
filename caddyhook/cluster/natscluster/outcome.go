package natscluster

import (
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// PublishOutcomes implements cluster.Outcomes with a core NATS publish on
// the namespace's outcome subject, sealed (best effort: nothing is
// stored, a node cut off when it is sent never sees it).
func (h *handle) PublishOutcomes(b cluster.OutcomeBatch) error {
	msg, ok := cluster.EncodeOutcomes(b)
	if !ok {
		return nil
	}
	return h.Broadcast(cluster.TopicOutcome, msg)
}

// SubscribeOutcomes implements cluster.Outcomes: a message longer than
// an outcome message can be, one that does not open with the cluster's
// keys and one that cluster.DecodeOutcomes refuses are dropped and
// counted as rejected outcomes.
func (h *handle) SubscribeOutcomes(fn func(cluster.OutcomeBatch)) (func(), error) {
	return h.subscribe(cluster.TopicOutcome, cluster.MaxOutcomeBytes+cluster.TagSize, func(msg []byte) {
		b, err := cluster.DecodeOutcomes(msg, time.Now(), h.ClockSkew())
		if err != nil {
			h.reject(cluster.RejectedOutcome, zap.String("subject", cluster.TopicOutcome), zap.Error(err))
			return
		}
		fn(b)
	})
}

// Interface guard
var _ cluster.Outcomes = (*handle)(nil)
