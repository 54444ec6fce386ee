package cluster

import (
	"slices"
	"strings"
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
	// LevelClusterView: the node answers the cluster view's requests
	// (TopicView). A node below it never answers: the cluster view names
	// it as a node that did not answer, and why.
	LevelClusterView = 2
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
//
// The gate also keeps who the members are: each live member's node and
// role (the topic it announces itself on: TopicLockout for every node,
// TopicDelivery for a delivery node), and for a while (SilentFor) the
// nodes that fell silent without saying that they stop (a killed or
// frozen process, a node cut off): Nodes lists them, for the cluster
// view.
type Gate struct {
	own      int
	holdFor  time.Duration
	mu       sync.Mutex
	peers    map[memberID]gatePeer
	silent   map[silentKey]time.Time // node and role → when it was last heard
	level    atomic.Int32            // the lowest level among the live members
	low      atomic.Int32            // a lower level in force until lowUntil
	lowUntil atomic.Int64            // Unix ns
}

// GateHold is how long a level stays in force after it was last seen, and
// how long the gate stays low while the membership is rebuilt: one
// member expiry at the default interval.
const GateHold = memberExpiry * DefaultMemberInterval

// NewGate returns the gate of a node running at level own, low (0)
// until its membership has been heard (for hold: GateHold; tests that
// know every member from the start pass 0).
func NewGate(own int, hold time.Duration) *Gate {
	g := &Gate{own: min(max(own, 0), MaxLevel), holdFor: hold, peers: map[memberID]gatePeer{}, silent: map[silentKey]time.Time{}}
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

// gatePeer is a live member: its level, its node and role, and when it
// was last heard from.
type gatePeer struct {
	level int
	node  string
	role  string
	seen  time.Time
	hello time.Time // when it last said hello (it started, or came back)
}

// silentKey is a node's role that fell silent.
type silentKey struct{ node, role string }

// Bounds of the silent nodes kept: SilentFor after they were last heard
// from, at most maxSilent of them (the oldest go first).
const (
	SilentFor = 10 * time.Minute
	maxSilent = 256
)

// set records a member's level, node and role (the topic it announces
// itself on), heard from now.
func (g *Gate) set(id memberID, node, role string, level int) {
	if g == nil {
		return
	}
	now := time.Now()
	if level < g.own {
		g.hold(level, now) // in force for the hold after its last announcement
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	node = NodeName(node)
	old, ok := g.peers[id]
	g.peers[id] = gatePeer{level: level, node: node, role: role, seen: now, hello: old.hello}
	delete(g.silent, silentKey{node, role})
	if !ok || old.level != level {
		g.recompute()
	}
}

// helloFrom records that the member id (set first) said hello: it
// started or came back, and its own gate holds at 0 for its hold.
func (g *Gate) helloFrom(id memberID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.peers[id]; ok {
		p.hello = time.Now()
		g.peers[id] = p
	}
}

// Joining reports whether node is a live member that said hello (it
// started, or came back) at most the hold before at: its own gate may
// still hold at level 0 then (it has not heard every member yet), so
// that what it writes at that time may be in the formats of level 0 although
// every member, itself included, runs at a higher level. A reader that
// refuses those formats above level 0 reads them from such a node.
func (g *Gate) Joining(node string, at time.Time) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	node = NodeName(node)
	for _, p := range g.peers {
		if p.node == node && !p.hello.IsZero() && at.Before(p.hello.Add(g.holdFor)) {
			return true
		}
	}
	return false
}

// forget removes members that left (they said so) or that this node no
// longer follows (its membership stopped).
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

// lost removes members forgotten for their silence, keeping their node
// and role among the silent ones.
func (g *Gate) lost(ids ...memberID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if p, ok := g.peers[id]; ok {
			g.silent[silentKey{p.node, p.role}] = p.seen
			delete(g.peers, id)
		}
	}
	g.pruneSilent(time.Now())
	g.recompute()
}

// pruneSilent forgets the silent nodes past SilentFor, and the oldest
// beyond maxSilent; g.mu is held.
func (g *Gate) pruneSilent(now time.Time) {
	for k, seen := range g.silent {
		if now.Sub(seen) > SilentFor {
			delete(g.silent, k)
		}
	}
	for len(g.silent) > maxSilent {
		var oldest silentKey
		first := true
		for k, seen := range g.silent {
			if first || seen.Before(g.silent[oldest]) {
				oldest, first = k, false
			}
		}
		delete(g.silent, oldest)
	}
}

// recompute updates the level; g.mu is held.
func (g *Gate) recompute() {
	l := g.own
	for _, p := range g.peers {
		l = min(l, p.level)
	}
	g.level.Store(int32(l))
}

// NodeInfo is another node as this one's memberships know it.
type NodeInfo struct {
	Node string
	// Level is the lowest cluster level its live members announce.
	Level int
	// Roles are the topics its live members announce themselves on
	// (TopicLockout, TopicDelivery), sorted; Silent the roles it fell
	// silent in (heard from, then not for three announcement intervals,
	// and no leave said), within SilentFor.
	Roles, Silent []string
	// Seen is when it was last heard from, in any role.
	Seen time.Time
}

// Live reports whether the node announces itself in some role.
func (n NodeInfo) Live() bool { return len(n.Roles) > 0 }

// Has reports whether the node has role, live or silent.
func (n NodeInfo) Has(role string) bool {
	return slices.Contains(n.Roles, role) || slices.Contains(n.Silent, role)
}

// Nodes lists the other nodes, live ones and those that fell silent
// within SilentFor, by node name (nil on a nil Gate).
func (g *Gate) Nodes() []NodeInfo {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneSilent(time.Now())
	byNode := map[string]*NodeInfo{}
	get := func(node string) *NodeInfo {
		n := byNode[node]
		if n == nil {
			n = &NodeInfo{Node: node, Level: MaxLevel + 1}
			byNode[node] = n
		}
		return n
	}
	for _, p := range g.peers {
		n := get(p.node)
		n.Level = min(n.Level, p.level)
		if !slices.Contains(n.Roles, p.role) {
			n.Roles = append(n.Roles, p.role)
		}
		if p.seen.After(n.Seen) {
			n.Seen = p.seen
		}
	}
	for k, seen := range g.silent {
		n := get(k.node)
		if !slices.Contains(n.Silent, k.role) {
			n.Silent = append(n.Silent, k.role)
		}
		if seen.After(n.Seen) {
			n.Seen = seen
		}
	}
	out := make([]NodeInfo, 0, len(byNode))
	for _, n := range byNode {
		if n.Level > MaxLevel {
			n.Level = 0 // silent in every role: its level is not known any more
		}
		slices.Sort(n.Roles)
		slices.Sort(n.Silent)
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b NodeInfo) int { return strings.Compare(a.Node, b.Node) })
	return out
}
