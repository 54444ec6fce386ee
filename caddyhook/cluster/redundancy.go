package cluster

import "time"

// Redundant is a Backend that tells how much redundancy its namespace has
// now, so that an operator hears of a lost replica before a second
// failure loses the quorum (a server whose disk filled up serves no
// JetStream until it restarts, and the namespace goes on with one replica
// fewer while Up stays true).
type Redundant interface {
	Redundancy() Redundancy
}

// Redundancy is the state of a namespace's streams and buckets as this
// node last read it.
type Redundancy struct {
	Streams []StreamReplicas
	// Stalled names the streams whose leader did not answer this node in
	// time although the node is up (their operations fail over to the
	// node's own state meanwhile).
	Stalled []string
	// Read is when the streams were last read (zero: not yet).
	Read time.Time
}

// StreamReplicas is one stream or bucket (by its engine's name).
type StreamReplicas struct {
	Name     string
	Replicas int    // configured
	Current  int    // current now, the leader included (0 without a leader)
	Leader   string // the server leading it, "" without one
	// Lagging names the replicas that are not current (offline, behind, or
	// on a server without JetStream).
	Lagging []string
}

// Degraded reports a namespace serving with less redundancy than
// configured: a stream or bucket with fewer current replicas, or a leader
// that does not answer.
func (r Redundancy) Degraded() bool {
	if len(r.Stalled) > 0 {
		return true
	}
	for _, s := range r.Streams {
		if s.Current < s.Replicas {
			return true
		}
	}
	return false
}
