package spool

import (
	"container/heap"
	"time"
)

// item is the in-memory index entry of one queued event. The record itself
// stays on disk; a worker loads it when it is about to send.
type item struct {
	seq       uint64
	size      int64 // key + record bytes as stored
	firstSeen time.Time
	nextTry   time.Time
	attempts  int
	identical int    // identical Repeatable answers in a row (Store.identical)
	lastWhy   uint64 // the hash of the last of them
	wake      bool
	inFlight  bool
	laneIdx   int // position in the lane heap holding it, -1 when none
	ageIdx    int // position in the index's age heap
}

// itemHeap is a binary heap of items ordered by less, recording each item's
// position through pos so it can be removed from the middle.
type itemHeap struct {
	items []*item
	less  func(a, b *item) bool
	pos   func(*item) *int
}

func (h *itemHeap) Len() int           { return len(h.items) }
func (h *itemHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *itemHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.pos(h.items[i]) = i
	*h.pos(h.items[j]) = j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	*h.pos(it) = len(h.items)
	h.items = append(h.items, it)
}
func (h *itemHeap) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	*h.pos(it) = -1
	return it
}

// top returns the least item, or nil.
func (h *itemHeap) top() *item {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func bySeq(a, b *item) bool { return a.seq < b.seq }
func byNextTry(a, b *item) bool {
	if a.nextTry.Equal(b.nextTry) {
		return a.seq < b.seq
	}
	return a.nextTry.Before(b.nextTry)
}
func lanePos(it *item) *int { return &it.laneIdx }
func agePos(it *item) *int  { return &it.ageIdx }

// lane hands out queued items to the workers that serve it. Every method is
// called with the store's mutex held.
type lane interface {
	// add makes a new or retried (not in-flight) item eligible.
	add(it *item)
	// take returns the next item to send, marked in flight, or nil and how
	// long to wait before asking again (negative: until signalled).
	take(now time.Time) (*item, time.Duration)
	// release ends its flight without delivery: it keeps its place and
	// becomes eligible again at it.nextTry.
	release(it *item)
	// remove forgets an in-flight item (delivered or dead-lettered).
	remove(it *item)
	// ready reports whether take would return an item now.
	ready(now time.Time) bool
}

// orderedLane serves wake events strictly in acceptance order: the head is
// delivered (or dead-lettered) before anything behind it is tried, so a
// failing head makes the lane wait.
type orderedLane struct {
	q itemHeap // by seq; the in-flight head stays in it
}

func newOrderedLane() *orderedLane {
	return &orderedLane{q: itemHeap{less: bySeq, pos: lanePos}}
}

func (l *orderedLane) add(it *item) { heap.Push(&l.q, it) }

func (l *orderedLane) take(now time.Time) (*item, time.Duration) {
	head := l.q.top()
	switch {
	case head == nil || head.inFlight:
		return nil, -1
	case head.nextTry.After(now):
		return nil, head.nextTry.Sub(now)
	}
	head.inFlight = true
	return head, 0
}

func (l *orderedLane) release(it *item) {
	it.inFlight = false
	heap.Fix(&l.q, it.laneIdx)
}

func (l *orderedLane) remove(it *item) {
	it.inFlight = false
	heap.Remove(&l.q, it.laneIdx)
}

func (l *orderedLane) ready(now time.Time) bool {
	head := l.q.top()
	return head != nil && !head.inFlight && !head.nextTry.After(now)
}

// poolLane serves agent events to several workers: the oldest ready item
// first, items waiting for a retry held aside until their time.
type poolLane struct {
	due     itemHeap // by seq: nextTry has passed
	waiting itemHeap // by nextTry
}

func newPoolLane() *poolLane {
	return &poolLane{
		due:     itemHeap{less: bySeq, pos: lanePos},
		waiting: itemHeap{less: byNextTry, pos: lanePos},
	}
}

func (l *poolLane) add(it *item) { heap.Push(&l.waiting, it) }

// promote moves every waiting item whose time has come to the ready heap.
func (l *poolLane) promote(now time.Time) {
	for top := l.waiting.top(); top != nil && !top.nextTry.After(now); top = l.waiting.top() {
		heap.Push(&l.due, heap.Pop(&l.waiting))
	}
}

func (l *poolLane) take(now time.Time) (*item, time.Duration) {
	l.promote(now)
	if l.due.Len() > 0 {
		it := heap.Pop(&l.due).(*item)
		it.inFlight = true
		return it, 0
	}
	if top := l.waiting.top(); top != nil {
		return nil, top.nextTry.Sub(now)
	}
	return nil, -1
}

func (l *poolLane) release(it *item) {
	it.inFlight = false
	heap.Push(&l.waiting, it)
}

// remove is a no-op beyond clearing the flag: an in-flight item is in
// neither heap.
func (l *poolLane) remove(it *item) { it.inFlight = false }

func (l *poolLane) ready(now time.Time) bool {
	l.promote(now)
	return l.due.Len() > 0
}

// index is the in-memory view of the queue bucket.
type index struct {
	wake  *orderedLane
	agent *poolLane
	age   itemHeap // every queued item by seq, in flight or not: the oldest is on top
}

func newIndex() *index {
	return &index{
		wake:  newOrderedLane(),
		agent: newPoolLane(),
		age:   itemHeap{less: bySeq, pos: agePos},
	}
}

// laneOf returns the lane serving it.
func (x *index) laneOf(it *item) lane {
	if it.wake {
		return x.wake
	}
	return x.agent
}

// insert adds a newly queued item.
func (x *index) insert(it *item) {
	heap.Push(&x.age, it)
	x.laneOf(it).add(it)
}

// forget removes an in-flight item for good.
func (x *index) forget(it *item) {
	x.laneOf(it).remove(it)
	heap.Remove(&x.age, it.ageIdx)
}

// depth is the number of queued items, in flight included.
func (x *index) depth() int { return x.age.Len() }

// oldest returns the earliest-accepted queued item, or nil.
func (x *index) oldest() *item { return x.age.top() }
