package natscluster

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// probeRetry is the probe interval while the namespace does not answer.
const probeRetry = 250 * time.Millisecond

// errNoLeader: the probed stream has no leader (it lost its quorum).
var errNoLeader = errors.New("stream has no leader (quorum lost)")

// healthLoop probes the namespace while connected: every timeout (at
// least a second) while it answers, every probeRetry while it does not,
// and at once after a reconnection or an operation that timed out. A
// connection alone is not enough to serve: the server it reaches may
// have lost its quorum, or the path to it may have gone silent.
func (s *shared) healthLoop() {
	defer s.bg.Done()
	every := max(time.Duration(s.cfg.Timeout), time.Second)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-s.probeNow:
		case <-t.C:
		}
		if s.ready.Load() && s.connected.Load() {
			err := s.probe()
			switch was := s.healthy.Swap(err == nil); {
			case err == nil && !was:
				s.log.Info("cluster answers again")
			case err != nil && was:
				s.log.Warn("cluster does not answer; running on local state until it does", zap.Error(err))
			}
			s.refresh()
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				s.reprovision()
			}
		}
		wait := every
		if !s.healthy.Load() {
			wait = probeRetry
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// probe asks the leader of the namespace's main stream (the queue, else
// the idempotency bucket) for its state, within one operation's timeout.
func (s *shared) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.Timeout))
	defer cancel()
	name := "KV_" + s.n.idem
	if s.queue != nil {
		name = s.n.queue
	}
	st, err := bounded(ctx, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, name) })
	if err != nil {
		return err
	}
	if ci := st.CachedInfo().Cluster; ci != nil && ci.Leader == "" {
		return errNoLeader
	}
	return nil
}

// reprovision creates the namespace again after its streams were removed
// behind the cluster's back.
func (s *shared) reprovision() {
	if !s.ready.CompareAndSwap(true, false) {
		return
	}
	s.log.Warn("cluster streams are gone; provisioning them again")
	s.refresh()
	s.provisionInBackground()
}

// opFailed marks the namespace as not answering after an operation that
// timed out (a server stopped or cut off mid-request, a quorum lost), so
// that the next requests fall back at once instead of each waiting for
// its own timeout, and probes it now.
func (s *shared) opFailed(err error) {
	if !timedOut(err) {
		return
	}
	if s.healthy.Swap(false) {
		s.log.Warn("cluster operation timed out; running on local state until the cluster answers", zap.Error(err))
		s.refresh()
	}
	signal(s.probeNow)
}

// timedOut reports an operation that got no answer in time.
func timedOut(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout))
}
