package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Topics of the engine's broadcasts: the lockout's members announce
// themselves on TopicLockout and each one receives its failures and
// acknowledgements on its own inbox (LockoutInbox); the delivery nodes
// announce themselves on TopicDelivery.
const (
	TopicLockout  = "auth"
	TopicDelivery = "deliver"
)

// LockoutInbox is the topic of the messages to the lockout member id
// (16 lower-case hex digits).
func LockoutInbox(id string) string { return TopicLockout + "." + id }

// DefaultMemberInterval is how often a member announces itself; one not
// heard from for memberExpiry intervals is gone.
const (
	DefaultMemberInterval = time.Second
	memberExpiry          = 3
)

// Member flags. The bits above flagHello carry the sender's cluster
// level (Gate): releases before levels were announced send 0 there and
// read only flagHello, so every release reads every other's
// announcements.
const (
	flagHello  = 1 // the sender just joined (or came back): answer at once
	levelShift = 1
)

// Members keeps the live members of one role: each member announces
// itself on the role's topic every interval (and at once when it starts
// or the engine is reachable again, asking the others to answer), says
// when it stops, and is forgotten when it has not been heard from for
// memberExpiry intervals. The view is soft state: while announcements are
// in flight two members may briefly see different sets.
type Members struct {
	b        Backend
	topic    string
	id       memberID
	node     string
	interval time.Duration
	skew     time.Duration
	onChange func()
	gate     *Gate // the namespace's version gate (the backend's)
	observer bool  // follows the role without being a member (ObserveMembers)

	mu    sync.Mutex
	peers map[memberID]*peer
	seq   uint64
	view  atomic.Pointer[memberView]

	stopSub, stopState func()
	done               chan struct{}
	wg                 sync.WaitGroup
	closeOnce          sync.Once
}

// peer is another live member.
type peer struct {
	seen time.Time
	seq  uint64
}

// memberView is an immutable snapshot of the live members, self
// included, ordered by id.
type memberView struct {
	ids  []memberID
	keys []uint64 // the ids as numbers, for rendezvous hashing
	self int      // index of this member
}

// NewMembers returns the membership of one role on topic; onChange (may
// be nil) is called, from the membership's own goroutines, after the
// live set changed. Start begins it.
func NewMembers(b Backend, topic string, interval time.Duration, onChange func()) *Members {
	if interval <= 0 {
		interval = DefaultMemberInterval
	}
	m := &Members{b: b, topic: topic, node: b.Node(), interval: interval, skew: b.ClockSkew(), onChange: onChange,
		gate: b.Gate(), peers: map[memberID]*peer{}, done: make(chan struct{})}
	_, _ = rand.Read(m.id[:])
	m.rebuild()
	return m
}

// ObserveMembers follows the members of the role on topic without being
// one (it never announces itself): their announcements reach the gate,
// which then knows who they are, and which of them fell silent, on a
// node that does not have the role (an edge learns the delivery nodes,
// for the cluster view). Start begins it, Close ends it.
func ObserveMembers(b Backend, topic string, interval time.Duration) *Members {
	m := NewMembers(b, topic, interval, nil)
	m.observer = true
	return m
}

// ID is this member's id as 16 hex digits.
func (m *Members) ID() string { return hex.EncodeToString(m.id[:]) }

// Start subscribes to the role's topic, announces this member and starts
// announcing it every interval.
func (m *Members) Start() error {
	stopSub, err := m.b.Subscribe(m.topic, m.receive)
	if err != nil {
		return err
	}
	m.stopSub = stopSub
	if m.observer {
		m.stopState = func() {}
		m.wg.Add(1)
		go m.loop()
		return nil
	}
	m.stopState = m.b.Watch(func(up bool) {
		if up {
			m.gate.Unsure() // the others answer the hello within a round trip
			m.announce(kindAlive, flagHello)
		}
	})
	m.gate.Unsure()
	m.announce(kindAlive, flagHello)
	m.wg.Add(1)
	go m.loop()
	return nil
}

// Close says that this member stops and stops the announcements.
func (m *Members) Close() {
	m.closeOnce.Do(func() {
		close(m.done)
		m.wg.Wait()
		if m.stopSub == nil {
			return // never started
		}
		m.stopState()
		if !m.observer {
			m.announce(kindLeave, 0)
		}
		m.stopSub()
		m.mu.Lock()
		ids := make([]memberID, 0, len(m.peers))
		for id := range m.peers {
			ids = append(ids, id)
		}
		m.mu.Unlock()
		m.gate.forget(ids...)
	})
}

// Count is the number of live members, this one included.
func (m *Members) Count() int { return len(m.view.Load().ids) }

// Rank is this member's position among the live members ordered by id,
// and their number.
func (m *Members) Rank() (int, int) {
	v := m.view.Load()
	return v.self, len(v.ids)
}

// owner returns the member that owns a's count (rendezvous hashing over
// the live members, so that a member joining or leaving moves only the
// addresses it gains or loses) and whether that is this member.
func (m *Members) owner(a Addr) (memberID, bool) {
	v := m.view.Load()
	h := addrHash(a)
	best, bestScore := v.self, uint64(0)
	for i, k := range v.keys {
		if s := mix64(h ^ k); s > bestScore || i == 0 {
			best, bestScore = i, s
		}
	}
	return v.ids[best], best == v.self
}

// addrHash hashes an address the same on every node.
func addrHash(a Addr) uint64 {
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	return mix64(hi*0x9e3779b97f4a7c15 ^ mix64(lo))
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// announce sends an alive or leaving message (best effort), with this
// node's cluster level.
func (m *Members) announce(kind, flags byte) {
	flags |= byte(m.gate.Own()) << levelShift
	m.mu.Lock()
	m.seq++
	msg := appendBeat(appendHeader(make([]byte, 0, 64), kind, m.node, m.id, m.seq), flags, time.Now().UnixMilli())
	m.mu.Unlock()
	_ = m.b.Broadcast(m.topic, msg)
}

// receive handles another member's announcement. An announcement sent
// longer ago than the expiry (plus the clock skew), or numbered not above
// the sender's last one, is a replay and dropped.
func (m *Members) receive(msg []byte) {
	w, err := parseWire(msg)
	if err != nil || (w.kind != kindAlive && w.kind != kindLeave) || w.sender == m.id {
		return
	}
	now := time.Now()
	if w.ms < now.Add(-time.Duration(memberExpiry)*m.interval-m.skew).UnixMilli() {
		return
	}
	m.mu.Lock()
	p, known := m.peers[w.sender]
	if known && w.seq <= p.seq {
		m.mu.Unlock()
		return
	}
	changed, answer := false, false
	switch {
	case w.kind == kindLeave:
		delete(m.peers, w.sender)
		changed = known
		m.gate.forget(w.sender)
	case known:
		p.seen, p.seq = now, w.seq
		answer = w.flags&flagHello != 0
		m.gate.set(w.sender, w.node, m.topic, int(w.flags>>levelShift))
	default:
		m.peers[w.sender] = &peer{seen: now, seq: w.seq}
		changed, answer = true, w.flags&flagHello != 0
		m.gate.set(w.sender, w.node, m.topic, int(w.flags>>levelShift))
	}
	if answer {
		m.gate.helloFrom(w.sender)
	}
	if changed {
		m.rebuild()
	}
	m.mu.Unlock()
	if answer && !m.observer {
		m.announce(kindAlive, 0)
	}
	if changed && m.onChange != nil {
		m.onChange()
	}
}

// loop announces this member every interval and forgets the members not
// heard from for the expiry.
func (m *Members) loop() {
	defer m.wg.Done()
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		if m.b.Up() && !m.observer {
			m.announce(kindAlive, 0)
		}
		if m.expire(time.Now()) && m.onChange != nil {
			m.onChange()
		}
	}
}

// expire forgets the members silent for the expiry; it reports a change.
func (m *Members) expire(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for id, p := range m.peers {
		if now.Sub(p.seen) > time.Duration(memberExpiry)*m.interval {
			delete(m.peers, id)
			m.gate.lost(id)
			changed = true
		}
	}
	if changed {
		m.rebuild()
	}
	return changed
}

// rebuild publishes a new view; m.mu is held (or m is not shared yet).
func (m *Members) rebuild() {
	ids := make([]memberID, 0, len(m.peers)+1)
	ids = append(ids, m.id)
	for id := range m.peers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b memberID) int { return bytes.Compare(a[:], b[:]) })
	v := &memberView{ids: ids, keys: make([]uint64, len(ids))}
	for i, id := range ids {
		v.keys[i] = binary.BigEndian.Uint64(id[:])
		if id == m.id {
			v.self = i
		}
	}
	m.view.Store(v)
}
