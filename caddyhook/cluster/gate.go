package cluster

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyhook/caddyhook/internal/version"
)

// Levels of the behaviours the gate turns on (internal/version.ClusterLevel
// lists them).
const (
	// LevelFreshRecords: outcome messages numbered per sender (version
	// 2, the old version refused); bucket values without their write
	// time (locks, idempotency claims, the wake lane's lease) refused.
	LevelFreshRecords = 1
)

// MaxLevel bounds a cluster level a member may announce (the seven bits
// of the announcement's flags byte above flagHello).
const MaxLevel = 127

// Gate is the cluster version gate of one namespace: the lowest cluster
// level (internal/version.ClusterLevel) among the live members, this node
// included. Members announce their level with their membership
// (Members); a behaviour that older nodes cannot follow runs only once
// Level reaches the level that introduced it, and the old behaviour runs
// before, so that nodes of two releases run together during a rolling
// upgrade (and after a rollback, which lowers the level again as soon as
// an older node announces itself). Nodes of releases before levels were
// announced announce level 0.
//
// A Gate is soft state, like the membership, and errs low: a member is
// counted from its first announcement until it leaves or is forgotten
// (three silent announcement intervals), a level seen stays in force for
// GateHold after its last announcement, and while the membership is
// rebuilt (a node starting, or reconnecting after an outage, whose peers
// answer its hello within a round trip) the gate stays at 0 for GateHold.
// So the level may stay low for a few seconds after the last old node
// stopped, never the other way round: a node announces itself before it
// publishes anything.
type Gate struct {
	own      int
	holdFor  time.Duration
	mu       sync.Mutex
	peers    map[memberID]int
	level    atomic.Int32 // the lowest level among the live members
	low      atomic.Int32 // a lower level in force until lowUntil
	lowUntil atomic.Int64 // Unix ns
}

// GateHold is how long a level stays in force after it was last seen, and
// how long the gate stays low while the membership is rebuilt: one
// member expiry at the default interval.
const GateHold = memberExpiry * DefaultMemberInterval

// NewGate returns the gate of a node running at level own, low (0)
// until its membership has been heard (for hold: GateHold; tests that
// know every member from the start pass 0).
func NewGate(own int, hold time.Duration) *Gate {
	g := &Gate{own: min(max(own, 0), MaxLevel), holdFor: hold, peers: map[memberID]int{}}
	g.level.Store(int32(g.own))
	g.Unsure()
	return g
}

// Unsure keeps the gate at 0 for its hold: the membership is being
// rebuilt (the node starts, or the engine is reachable again), and an
// older node may not have answered yet.
func (g *Gate) Unsure() {
	if g == nil {
		return
	}
	g.hold(0, time.Now())
}

// hold keeps the gate at l or below until now + the hold.
func (g *Gate) hold(l int, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.UnixNano() < g.lowUntil.Load() && int(g.low.Load()) < l {
		l = int(g.low.Load()) // a lower level still in force
	}
	g.low.Store(int32(l))
	g.lowUntil.Store(now.Add(g.holdFor).UnixNano())
}

// Own is the level this node runs at (this build's on a nil Gate).
func (g *Gate) Own() int {
	if g == nil {
		return version.ClusterLevel
	}
	return g.own
}

// Level is the lowest level among the live members, this node included
// (0 on a nil Gate: an engine that keeps none runs the old behaviours).
func (g *Gate) Level() int {
	if g == nil {
		return 0
	}
	l := int(g.level.Load())
	if time.Now().UnixNano() < g.lowUntil.Load() {
		l = min(l, int(g.low.Load()))
	}
	return l
}

// AtLeast reports whether every live member runs at level l or above.
func (g *Gate) AtLeast(l int) bool { return g.Level() >= l }

// set records a member's level.
func (g *Gate) set(id memberID, level int) {
	if g == nil {
		return
	}
	if level < g.own {
		g.hold(level, time.Now()) // in force for the hold after its last announcement
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.peers[id]; ok && old == level {
		return
	}
	g.peers[id] = level
	g.recompute()
}

// forget removes members that left or were forgotten.
func (g *Gate) forget(ids ...memberID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		delete(g.peers, id)
	}
	g.recompute()
}

// recompute updates the level; g.mu is held.
func (g *Gate) recompute() {
	l := g.own
	for _, pl := range g.peers {
		l = min(l, pl)
	}
	g.level.Store(int32(l))
}
