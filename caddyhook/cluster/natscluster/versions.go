package natscluster

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/version"
)

// versions is what a connection keeps about the releases it runs with:
// the namespace's cluster version gate (fed by the members of every role,
// see cluster.Members), the numbering of its outcome messages, and the
// records of a newer release it met (kept unread, each counted once).
type versions struct {
	gate     *cluster.Gate
	outcomes *cluster.OutcomeSender

	newerMu   sync.Mutex
	newerSeen map[newerKey]struct{}
	newerLog  time.Time
}

// newerKey is a record of a newer release: its store and its place (a
// stream sequence).
type newerKey struct {
	store string
	seq   uint64
}

// maxNewerSeen bounds the newer records remembered (beyond it each one
// is counted every time it is met).
const maxNewerSeen = 1 << 16

// initVersions sets the connection's gate at this build's level (or the
// configured one: tests run older nodes).
func (s *shared) initVersions() {
	level := version.ClusterLevel
	if s.cfg.level != nil {
		level = *s.cfg.level
	}
	s.gate = cluster.NewGate(level, cluster.GateHold)
	s.outcomes = cluster.NewOutcomeSender()
	s.newerSeen = map[newerKey]struct{}{}
}

// Gate implements cluster.Backend.
func (h *handle) Gate() *cluster.Gate { return h.gate }

// acceptUnsealed reports whether the unsealed records of a release
// without signing_key are read now (accept_unsealed_until).
func (s *shared) acceptUnsealed() bool {
	return !s.cfg.unsealedUntil.IsZero() && time.Now().Before(s.cfg.unsealedUntil)
}

// newer keeps a record of store that a newer release wrote in version v,
// at seq (0: no place to tell it by): counted in
// caddy_hooks_records_unreadable_total once per record, logged within the
// budget of the rejections (where it is, never what it holds).
func (s *shared) newer(store string, v int, seq uint64, where ...zap.Field) {
	s.newerMu.Lock()
	k := newerKey{store, seq}
	_, seen := s.newerSeen[k]
	if !seen && seq != 0 && len(s.newerSeen) < maxNewerSeen {
		s.newerSeen[k] = struct{}{}
	}
	now := time.Now()
	log := now.Sub(s.newerLog) >= rejectLogEvery
	if log {
		s.newerLog = now
	}
	s.newerMu.Unlock()
	if !seen {
		s.p.Metrics.Newer(store, v)
	}
	if log {
		s.log.Warn("cluster: keeping a record written by a newer release, unread: it stays for a node of that release (a rollback loses nothing)",
			append(where, zap.String("store", store), zap.Int("version", v))...)
	}
}
