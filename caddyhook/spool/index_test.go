package spool

import (
	"slices"
	"testing"
	"time"
)

func TestOrderedLaneHeadOfLine(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newOrderedLane()
	items := map[uint64]*item{}
	for _, seq := range []uint64{3, 1, 2} { // insertion order must not matter
		items[seq] = &item{seq: seq, wake: true}
		l.add(items[seq])
	}

	it, _ := l.take(now)
	if it == nil || it.seq != 1 {
		t.Fatalf("take = %v, want seq 1", it)
	}
	if got, wait := l.take(now); got != nil || wait >= 0 {
		t.Fatalf("second take while head in flight = %v, %v; want nil, no timeout", got, wait)
	}

	// The head fails and is rescheduled: nothing behind it may go first.
	it.nextTry = now.Add(3 * time.Second)
	l.release(it)
	if got, wait := l.take(now.Add(time.Second)); got != nil || wait != 2*time.Second {
		t.Fatalf("take before head's retry = %v, %v; want nil, 2s", got, wait)
	}
	if l.ready(now) {
		t.Fatal("ready while the head waits")
	}
	if got, _ := l.take(now.Add(3 * time.Second)); got != items[1] {
		t.Fatalf("take at retry time = %v, want seq 1", got)
	}
	l.remove(items[1])

	for _, want := range []uint64{2, 3} {
		got, _ := l.take(now)
		if got == nil || got.seq != want {
			t.Fatalf("take = %v, want seq %d", got, want)
		}
		l.remove(got)
	}
	if got, wait := l.take(now); got != nil || wait >= 0 {
		t.Fatalf("take on empty lane = %v, %v", got, wait)
	}
}

func TestPoolLaneOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newPoolLane()
	later := now.Add(5 * time.Second)
	for _, it := range []*item{
		{seq: 4},
		{seq: 2, nextTry: later},
		{seq: 1},
		{seq: 3, nextTry: now.Add(-time.Second)},
		{seq: 5, nextTry: now.Add(2 * time.Second)},
	} {
		l.add(it)
	}

	var got []uint64
	for {
		it, wait := l.take(now)
		if it == nil {
			if wait != 2*time.Second {
				t.Fatalf("wait = %v, want 2s (seq 5's retry)", wait)
			}
			break
		}
		if !it.inFlight {
			t.Fatalf("taken item %d not marked in flight", it.seq)
		}
		got = append(got, it.seq)
	}
	if want := []uint64{1, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("ready order = %v, want %v", got, want)
	}

	got = got[:0]
	for it, _ := l.take(later); it != nil; it, _ = l.take(later) {
		got = append(got, it.seq)
	}
	if want := []uint64{2, 5}; !slices.Equal(got, want) {
		t.Fatalf("order once all are due = %v, want %v (acceptance order, not retry time)", got, want)
	}
}

func TestPoolLaneRelease(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newPoolLane()
	a, b := &item{seq: 1}, &item{seq: 2}
	l.add(a)
	l.add(b)
	first, _ := l.take(now)
	first.nextTry = now.Add(time.Second)
	l.release(first)
	if next, _ := l.take(now); next != b {
		t.Fatalf("after releasing seq 1 for later, take = %v, want seq 2", next)
	}
	if !l.ready(now.Add(time.Second)) {
		t.Fatal("released item not ready at its next try")
	}
}

func TestIndexOldestAndDepth(t *testing.T) {
	x := newIndex()
	base := time.Unix(1000, 0)
	items := make([]*item, 6)
	for i := range items {
		items[i] = &item{seq: uint64(10 - i), firstSeen: base.Add(time.Duration(10-i) * time.Second), wake: i%2 == 0}
		x.insert(items[i])
	}
	if x.depth() != 6 || x.oldest() != items[5] {
		t.Fatalf("depth %d oldest %+v; want 6 and seq 5", x.depth(), x.oldest())
	}
	// Take and forget the oldest agent item (seq 5), then the oldest wake (seq 6).
	now := base.Add(time.Hour)
	for _, l := range []lane{x.agent, x.wake} {
		it, _ := l.take(now)
		x.forget(it)
	}
	if x.depth() != 4 || x.oldest().seq != 7 {
		t.Fatalf("after two deliveries depth %d oldest seq %d; want 4 and 7", x.depth(), x.oldest().seq)
	}
}
