package natscluster

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// topicRe is what a broadcast topic may be (cluster.Backend).
var topicRe = regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9]+){0,7}$`)

// topicSubject returns the subject of topic and what its messages are
// (their seal context and the kind they are counted as when they do not
// open): the lockout's topics carry failures, the others announcements.
func (h *handle) topicSubject(topic string) (subject, seal, rejected string, err error) {
	if !topicRe.MatchString(topic) {
		return "", "", "", fmt.Errorf("cluster nats: topic %q: want dot-separated words of a-z and 0-9", topic)
	}
	subject = h.n.auth[:len(h.n.auth)-len("auth")] + topic
	switch {
	case topic == cluster.TopicLockout || strings.HasPrefix(topic, cluster.TopicLockout+"."):
		return subject, sealFailures, cluster.RejectedFailures, nil
	case topic == cluster.TopicOutcome:
		return subject, sealOutcome, cluster.RejectedOutcome, nil
	}
	return subject, sealMembers, cluster.RejectedMembers, nil
}

// Broadcast implements cluster.Backend with a core NATS publish, sealed.
func (h *handle) Broadcast(topic string, msg []byte) error {
	subject, seal, _, err := h.topicSubject(topic)
	if err != nil {
		return err
	}
	if !h.up() {
		return cluster.ErrUnavailable
	}
	return h.nc.Publish(subject, h.seal(slices.Clip(msg), seal, subject))
}

// Subscribe implements cluster.Backend; the subscription survives
// reconnections. A broadcast that does not open is dropped.
func (h *handle) Subscribe(topic string, fn func(msg []byte)) (func(), error) {
	return h.subscribe(topic, 0, fn)
}

// subscribe is Subscribe with a bound on the sealed message's length
// (0: none): a longer one is dropped and counted before its seal is
// checked.
func (h *handle) subscribe(topic string, maxLen int, fn func(msg []byte)) (func(), error) {
	subject, seal, rejected, err := h.topicSubject(topic)
	if err != nil {
		return nil, err
	}
	sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) {
		if maxLen > 0 && len(m.Data) > maxLen {
			h.reject(rejected, zap.String("subject", m.Subject), zap.Int("bytes", len(m.Data)))
			return
		}
		msg, ok := h.open(m.Data, seal, subject)
		if !ok {
			h.reject(rejected, zap.String("subject", m.Subject))
			return
		}
		fn(msg)
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(1<<16, 64<<20)
	// a round trip, so that the server has the subscription before Start
	// returns: what another node broadcasts from then on reaches this one
	// (NATS core drops messages for a subscription it does not know yet);
	// while the server is unreachable this just times out
	_ = h.nc.FlushTimeout(time.Duration(h.cfg.Timeout))
	return func() { _ = sub.Unsubscribe() }, nil
}

// PutLock implements cluster.Backend. Records live for the bucket's TTL
// (the longest lock); the value, sealed, carries the lock's own end.
func (h *handle) PutLock(ctx context.Context, key string, val []byte, _ time.Duration) error {
	kv := h.locks.Load()
	if kv == nil || !h.up() {
		return cluster.ErrUnavailable
	}
	_, err := kv.Put(ctx, key, h.seal(slices.Clip(val), sealLock, h.n.locks, key))
	return err
}

// WatchLocks implements cluster.Backend: a watcher of the lock bucket,
// created afresh (replaying every live lock) whenever the engine becomes
// reachable; each record comes with the server's time of its write.
func (h *handle) WatchLocks(fn func(val []byte, stored time.Time)) (func(), error) {
	changed := make(chan struct{}, 1)
	stopState := h.hub.watch(func(bool) { signal(changed) }, h.up())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if !h.watchLocksOnce(fn, changed, stop) {
				return
			}
		}
	}()
	return func() {
		stopState()
		close(stop)
		<-done
	}, nil
}

// watchLocksOnce runs one watcher while the engine stays reachable; it
// reports false when stopped.
func (h *handle) watchLocksOnce(fn func([]byte, time.Time), changed, stop chan struct{}) bool {
	kv := h.locks.Load()
	if kv == nil || !h.up() {
		select {
		case <-stop:
			return false
		case <-h.closing:
			return false
		case <-changed:
			return true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		select {
		case <-stop:
			return false
		case <-time.After(500 * time.Millisecond):
			return true
		}
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-stop:
			return false
		case <-h.closing:
			return false
		case <-changed:
			if !h.up() {
				return true
			}
		case e, ok := <-w.Updates():
			if !ok {
				return true
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if val, ok := h.open(e.Value(), sealLock, h.n.locks, e.Key()); ok {
				fn(val, e.Created())
			} else {
				h.reject(cluster.RejectedLock, zap.String("bucket", h.n.locks))
			}
		}
	}
}
