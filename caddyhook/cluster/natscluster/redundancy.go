package natscluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// redundancy is the last reading of the namespace's replicas.
type redundancy struct {
	mu     sync.Mutex
	last   cluster.Redundancy
	behind map[string]bool // "stream/peer": not current at the previous reading
}

// Redundancy implements cluster.Redundant.
func (h *handle) Redundancy() cluster.Redundancy {
	h.redundancy.mu.Lock()
	r := h.redundancy.last
	h.redundancy.mu.Unlock()
	r.Streams = slices.Clone(r.Streams)
	if h.idemStalled.Load() && !slices.Contains(r.Stalled, "KV_"+h.n.idem) {
		r.Stalled = append(slices.Clone(r.Stalled), "KV_"+h.n.idem)
	}
	return r
}

// redundancyLoop reads the replicas while the node is connected and
// provisioned, every stalledAfter (the server in use is left once it has
// stopped following for that long).
func (s *shared) redundancyLoop() {
	defer s.bg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		if s.ready.Load() && s.connected.Load() {
			s.readRedundancy()
		}
		t.Reset(s.stalledAfter()) // as often as a replica may stay silent
	}
}

// streamNames are the namespace's streams, buckets' included.
func (s *shared) streamNames() []string {
	names := []string{"KV_" + s.n.idem, "KV_" + s.n.locks}
	if s.queue != nil {
		names = append([]string{s.n.queue, s.n.deadStream}, append(names, "KV_"+s.n.lanes)...)
	}
	return names
}

// readRedundancy asks each stream's leader for its replicas, all within
// one timeout. A replica counts as current unless the leader says, at two
// readings in a row, that it is not (a follower a few messages behind
// under load catches up in milliseconds; one whose server stopped, lost
// its JetStream to a full disk or stalled stays behind); a stream whose
// leader does not answer counts no current replica and is named stalled.
func (s *shared) readRedundancy() {
	ctx, cancel := context.WithTimeout(s.life, time.Duration(s.cfg.Timeout))
	defer cancel()
	names := s.streamNames()
	out := make([]cluster.StreamReplicas, len(names))
	stalled := make([]bool, len(names))
	mine := s.servers.nameInUse()
	s.redundancy.mu.Lock()
	before := s.redundancy.behind
	s.redundancy.mu.Unlock()
	behind := map[string]bool{}
	var lagMu sync.Mutex
	lagStream, lagFor := "", time.Duration(0) // the server in use, silent as a replica
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			r := cluster.StreamReplicas{Name: name, Replicas: s.cfg.Replicas}
			st, err := bounded(ctx, func(ctx context.Context) (jetstream.Stream, error) { return s.js.Stream(ctx, name) })
			switch {
			case err == nil:
				info := st.CachedInfo()
				r.Replicas = max(info.Config.Replicas, 1)
				ci := info.Cluster
				if ci == nil { // a server of its own: its one replica serves
					r.Current = 1
					break
				}
				r.Leader = ci.Leader
				if ci.Leader != "" {
					r.Current = 1
				}
				// the server in use is stalled when the leader hears from
				// another follower but not from it (a leader that hears
				// from none may be the stalled one: its view is stale)
				heard := slices.ContainsFunc(ci.Replicas, func(p *jetstream.PeerInfo) bool {
					return p.Name != mine && !p.Offline && p.Active < s.stalledAfter()
				})
				for _, p := range ci.Replicas {
					if p.Current && !p.Offline {
						r.Current++
						continue
					}
					lagMu.Lock()
					behind[name+"/"+p.Name] = true
					if p.Name == mine && heard && !p.Offline && p.Active >= s.stalledAfter() && p.Active > lagFor {
						lagStream, lagFor = name, p.Active
					}
					lagMu.Unlock()
					if before[name+"/"+p.Name] {
						r.Lagging = append(r.Lagging, p.Name)
					} else {
						r.Current++ // behind once: maybe only for a moment
					}
				}
			case timedOut(err) || errors.Is(err, context.Canceled):
				stalled[i] = true
			}
			out[i] = r
		})
	}
	wg.Wait()
	if s.life.Err() != nil {
		return
	}
	red := cluster.Redundancy{Streams: out, Read: time.Now()}
	for i, st := range stalled {
		if st {
			red.Stalled = append(red.Stalled, names[i])
		}
	}
	s.redundancy.mu.Lock()
	s.redundancy.last, s.redundancy.behind = red, behind
	s.redundancy.mu.Unlock()
	if lagStream != "" && mine == s.servers.nameInUse() {
		s.checkLagging(lagStream, lagFor)
	}
}
