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
// have lost its quorum, the path to it may have gone silent, or the
// server may answer PINGs while its JetStream is stalled (checkGray then
// moves the node to another server). A stalled idempotency bucket is
// probed on its own (idemStalled).
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
			err, sideErr, compared := s.probeAndCompare()
			switch was := s.healthy.Swap(err == nil); {
			case err == nil && !was:
				s.log.Info("cluster answers again")
			case err != nil && was:
				s.log.Warn("cluster does not answer; running on local state until it does", zap.Error(err))
			}
			s.refresh()
			s.silent.Store(timedOut(err))
			switch {
			case err == nil:
				s.grayWait, s.grayNext = 0, time.Time{}
			case errors.Is(err, jetstream.ErrStreamNotFound):
				s.reprovision()
			case compared && timedOut(err) && s.connected.Load():
				s.checkGray(err, sideErr) // connected, and JetStream silent
			}
			if err == nil && s.idemStalled.Load() {
				s.probeIdem()
			}
		}
		s.side.closeIdle()
		wait := every
		if !s.healthy.Load() || s.idemStalled.Load() {
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

// probeAndCompare probes the namespace; when the last probe or operation
// timed out while connected (silent), it asks another server the same
// question at the same moment (see checkGray).
func (s *shared) probeAndCompare() (err, sideErr error, compared bool) {
	if !s.silent.Load() || time.Now().Before(s.grayNext) {
		return s.probe(), nil, false
	}
	done := make(chan struct{})
	go func() { defer close(done); sideErr = s.sideProbe() }()
	err = s.probe()
	<-done
	return err, sideErr, true
}

// probeStream is the namespace's main stream: the queue, else the
// idempotency bucket's.
func (s *shared) probeStream() string {
	if s.queue != nil {
		return s.n.queue
	}
	return "KV_" + s.n.idem
}

// probe asks the leader of the namespace's main stream for its state,
// within one operation's timeout.
func (s *shared) probe() error { return s.askLeader(s.probeStream()) }

// askLeader asks the leader of stream for its state, within one
// operation's timeout.
func (s *shared) askLeader(stream string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.cfg.Timeout))
	defer cancel()
	st, err := bounded(ctx, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, stream) })
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
	s.silent.Store(true)
	if s.healthy.Swap(false) {
		s.log.Warn("cluster operation timed out; running on local state until the cluster answers", zap.Error(err))
		s.refresh()
	}
	signal(s.probeNow)
}

// idemFailed follows an idempotency operation that timed out. With a
// queue, the node stays up (its queue may answer: a stalled bucket leader
// must not turn every event away) and the bucket alone is marked stalled:
// claims fail at once, so that the node's own cache answers, until a
// probe of the bucket's leader answers again. Without a queue the bucket
// is the namespace's main stream: the node is down, as opFailed says.
// Either way the namespace is probed now (a silent connection times out
// every operation).
func (s *shared) idemFailed(err error) {
	if !timedOut(err) {
		return
	}
	if s.queue == nil {
		s.opFailed(err)
		return
	}
	if !s.idemStalled.Swap(true) {
		s.log.Warn("cluster idempotency bucket does not answer in time; each node's own cache answers until it does",
			zap.String("bucket", s.n.idem), zap.Error(err))
	}
	signal(s.probeNow)
}

// probeIdem asks the idempotency bucket's leader, and ends idemStalled
// when it answers.
func (s *shared) probeIdem() {
	if err := s.askLeader("KV_" + s.n.idem); err == nil && s.idemStalled.Swap(false) {
		s.log.Info("cluster idempotency bucket answers again", zap.String("bucket", s.n.idem))
	}
}

// timedOut reports an operation that got no answer in time.
func timedOut(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout))
}
