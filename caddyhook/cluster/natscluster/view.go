package natscluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/version"
)

// The cluster view (cluster.Views) by core NATS request and reply: a
// request goes to hooks.<name>.view, sealed for that subject; each node
// answers to the request's reply inbox, sealed for that inbox, which the
// request names (sealed with it), so that a request replayed with
// another reply subject is not answered; a live tail's batches go to the
// asker's inbox, sealed for it. Nothing is stored.

// maxViewServing bounds the requests a node answers at once; the others
// go unanswered (their askers name the node as not answering).
const maxViewServing = 4

// maxViewSeen bounds the request ids a node remembers (a request seen
// again within ViewWindow is a replay, not answered twice).
const maxViewSeen = 4096

// viewSubject is the subject of the view's requests.
func (h *handle) viewSubject() string {
	return h.n.auth[:len(h.n.auth)-len("auth")] + cluster.TopicView
}

// readView opens and decodes a view message of kind seal received on
// where; a message that is too long, does not open or does not decode is
// dropped and counted.
func (h *handle) readView(data []byte, seal, where string) (cluster.ViewMessage, bool) {
	if len(data) > cluster.MaxViewBytes+cluster.TagSize {
		h.reject(cluster.RejectedView, zap.String("subject", where), zap.Int("bytes", len(data)))
		return cluster.ViewMessage{}, false
	}
	msg, ok := h.open(data, seal, where)
	if !ok {
		h.reject(cluster.RejectedView, zap.String("subject", where))
		return cluster.ViewMessage{}, false
	}
	m, err := cluster.DecodeView(msg, time.Now(), h.ClockSkew())
	switch {
	case errors.Is(err, cluster.ErrNewerView):
		h.newer(version.StoreView, cluster.ViewVersionOf(msg), 0, zap.String("subject", where))
		return m, false
	case err != nil:
		h.reject(cluster.RejectedView, zap.String("subject", where), zap.Error(err))
		return m, false
	}
	return m, true
}

// sendView seals and publishes m to subject (a request with its reply
// subject).
func (h *handle) sendView(m cluster.ViewMessage, seal, subject string) error {
	if !h.up() {
		return cluster.ErrUnavailable
	}
	msg, err := cluster.EncodeView(m)
	if err != nil {
		return err
	}
	if m.Request != nil {
		return h.nc.PublishRequest(subject, m.Request.Reply, h.seal(msg, seal, subject))
	}
	return h.nc.Publish(subject, h.seal(msg, seal, subject))
}

// AskView implements cluster.Views.
func (h *handle) AskView(ctx context.Context, q cluster.ViewRequest, fn func(cluster.ViewAnswer) bool) error {
	if !h.up() {
		return cluster.ErrUnavailable
	}
	q.Reply = nats.NewInbox()
	answers := make(chan cluster.ViewAnswer, 256)
	sub, err := h.nc.Subscribe(q.Reply, func(m *nats.Msg) {
		v, ok := h.readView(m.Data, sealViewAnswer, q.Reply)
		if !ok || v.Answer == nil || v.Answer.ID != q.ID {
			return
		}
		select {
		case answers <- *v.Answer:
		default: // more answers than nodes: dropped
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(256, 64<<20)
	if err := h.sendView(cluster.ViewMessage{Request: &q}, sealView, h.viewSubject()); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case a := <-answers:
			if fn(a) {
				return nil
			}
		}
	}
}

// viewServer answers the view's requests of one ServeView.
type viewServer struct {
	h     *handle
	fn    func(cluster.ViewRequest) cluster.ViewAnswer
	slots chan struct{}

	mu   sync.Mutex
	seen map[string]time.Time // request ids answered, until they are stale
}

// ServeView implements cluster.Views. A node whose cluster level is below
// cluster.LevelClusterView (a test's older node) serves nothing, as the
// releases before the view.
func (h *handle) ServeView(fn func(cluster.ViewRequest) cluster.ViewAnswer) (func(), error) {
	if h.gate.Own() < cluster.LevelClusterView {
		return func() {}, nil
	}
	vs := &viewServer{h: h, fn: fn, slots: make(chan struct{}, maxViewServing), seen: map[string]time.Time{}}
	subject := h.viewSubject()
	sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) {
		v, ok := h.readView(m.Data, sealView, subject)
		if !ok || v.Request == nil {
			return
		}
		vs.serve(*v.Request, m.Reply)
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(1024, 16<<20)
	_ = h.nc.FlushTimeout(time.Duration(h.cfg.Timeout))
	return func() { _ = sub.Unsubscribe() }, nil
}

// serve answers q, received with the reply subject reply, in its own
// goroutine when a slot is free.
func (vs *viewServer) serve(q cluster.ViewRequest, reply string) {
	if q.From == vs.h.node || reply != q.Reply || !vs.first(q.ID, time.Now()) {
		return // its own (it answers itself), moved to another reply subject, or a replay
	}
	select {
	case vs.slots <- struct{}{}:
	default:
		vs.h.log.Debug("cluster view: busy; a request goes unanswered", zap.String("from", q.From), zap.String("op", q.Op))
		return
	}
	go func() {
		defer func() { <-vs.slots }()
		a := vs.fn(q)
		a.ID, a.Node, a.Time = q.ID, vs.h.node, time.Now()
		if err := vs.h.sendView(cluster.ViewMessage{Answer: &a}, sealViewAnswer, q.Reply); err != nil {
			vs.h.log.Debug("cluster view: answer not sent", zap.String("to", q.From), zap.Error(err))
		}
	}()
}

// first reports whether the request id was not seen within the window.
func (vs *viewServer) first(id string, now time.Time) bool {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if stale, ok := vs.seen[id]; ok && now.Before(stale) {
		return false
	}
	if len(vs.seen) >= maxViewSeen {
		for k, stale := range vs.seen {
			if !now.Before(stale) {
				delete(vs.seen, k)
			}
		}
		if len(vs.seen) >= maxViewSeen {
			return false // flooded with fresh ids: answer none until they age
		}
	}
	vs.seen[id] = now.Add(2*cluster.ViewWindow + 2*vs.h.ClockSkew())
	return true
}

// FollowView implements cluster.Views.
func (h *handle) FollowView(fn func(cluster.TailBatch)) (string, func(), error) {
	inbox := nats.NewInbox()
	batches := make(chan cluster.TailBatch, 256)
	done := make(chan struct{})
	sub, err := h.nc.Subscribe(inbox, func(m *nats.Msg) {
		v, ok := h.readView(m.Data, sealViewTail, inbox)
		if !ok || v.Tail == nil || v.Tail.Inbox != inbox {
			return
		}
		select {
		case batches <- *v.Tail:
		default: // the follower fell behind: the gap in the numbers says so
		}
	})
	if err != nil {
		return "", nil, err
	}
	_ = sub.SetPendingLimits(1024, 64<<20)
	// the server knows the inbox before it is named to anyone
	_ = h.nc.FlushTimeout(time.Duration(h.cfg.Timeout))
	go func() {
		for {
			select {
			case <-done:
				return
			case b := <-batches:
				fn(b)
			}
		}
	}()
	var once sync.Once
	return inbox, func() {
		once.Do(func() {
			_ = sub.Unsubscribe()
			close(done)
		})
	}, nil
}

// SendTail implements cluster.Views.
func (h *handle) SendTail(b cluster.TailBatch) error {
	return h.sendView(cluster.ViewMessage{Tail: &b}, sealViewTail, b.Inbox)
}

// Interface guard
var _ cluster.Views = (*handle)(nil)
