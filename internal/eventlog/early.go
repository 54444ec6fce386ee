package eventlog

// Bounds of the updates kept for actions not accepted yet (earlyUpdates).
const (
	// maxEarly bounds the updates kept, for all actions together.
	maxEarly = 1024
	// maxEarlyPerAction bounds the updates kept for one action: an
	// action gets a handful of outcomes before its request's answer is
	// recorded; past that the oldest go.
	maxEarlyPerAction = 8
	// maxEarlyBytes bounds what the updates kept would write.
	maxEarlyBytes = 1 << 20
	// earlyOverhead is the cost of keeping one update (the closure, its
	// slot and the map entry), beyond what it writes.
	earlyOverhead = 128
)

// earlyUpdates holds the updates of actions a log does not hold yet: a
// spooled event can be delivered, and its outcome reach this node from
// another, before its request's answer is recorded. Outcomes of events
// this node never accepts land here too, and a replayed outcome message
// arrives again and again (one recorded message replayed 2.7 million
// times grew a node from 63 to 1,480 MiB when only the actions were
// counted), so the buffer is bounded in updates per action, in updates
// and in bytes. An update is charged what it writes (measured by applying
// it to an empty dispatch) plus earlyOverhead. Past the total bounds the
// buffer starts over, as the updates it held are mostly of events never
// accepted here.
type earlyUpdates struct {
	byAction map[string][]earlyUpdate
	count    int
	bytes    int64
}

// earlyUpdate is one update kept and what it is charged.
type earlyUpdate struct {
	apply func(*Dispatch) bool
	cost  int64
}

// add keeps f, an update of the action id.
func (b *earlyUpdates) add(id string, f func(*Dispatch) bool) {
	probe := Dispatch{ID: id}
	f(&probe)
	cost := int64(earlyOverhead + dispatchOverhead + len(probe.ID) + len(probe.Kind) + len(probe.State) +
		len(probe.RunID) + len(probe.Error) + len(probe.Node))
	if b.count >= maxEarly || b.bytes+cost > maxEarlyBytes {
		*b = earlyUpdates{}
	}
	if b.byAction == nil {
		b.byAction = map[string][]earlyUpdate{}
	}
	kept := b.byAction[id]
	if len(kept) >= maxEarlyPerAction {
		b.count--
		b.bytes -= kept[0].cost
		kept = append(kept[:0], kept[1:]...)
	}
	b.byAction[id] = append(kept, earlyUpdate{apply: f, cost: cost})
	b.count++
	b.bytes += cost
}

// take removes and returns the updates kept for the action id, oldest
// first.
func (b *earlyUpdates) take(id string) []earlyUpdate {
	kept, ok := b.byAction[id]
	if !ok {
		return nil
	}
	delete(b.byAction, id)
	b.count -= len(kept)
	for _, u := range kept {
		b.bytes -= u.cost
	}
	return kept
}

// empty reports whether nothing is kept.
func (b *earlyUpdates) empty() bool { return b.count == 0 }
