package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
)

// benchBackend is a Backend that delivers nothing: it counts what is
// sent, so that a benchmark measures the lockout's own work per record
// and per batch (the engine's seal, BenchmarkSeal, and its I/O come on
// top).
type benchBackend struct {
	mu   sync.Mutex
	sent int
}

func (*benchBackend) Node() string                                   { return "bench-node" }
func (*benchBackend) Name() string                                   { return "bench" }
func (*benchBackend) Up() bool                                       { return true }
func (*benchBackend) Timeout() time.Duration                         { return time.Second }
func (*benchBackend) Watch(func(bool)) func()                        { return func() {} }
func (*benchBackend) ClockSkew() time.Duration                       { return time.Second }
func (*benchBackend) Subscribe(string, func([]byte)) (func(), error) { return func() {}, nil }
func (*benchBackend) PutLock(context.Context, string, []byte, time.Duration) error {
	return nil
}
func (*benchBackend) WatchLocks(func([]byte, time.Time)) (func(), error) { return func() {}, nil }
func (*benchBackend) Gate() *Gate                                        { return nil }
func (*benchBackend) Claims() ClaimStore                                 { return nil }
func (*benchBackend) Queue() QueueStore                                  { return nil }
func (*benchBackend) Close() error                                       { return nil }
func (b *benchBackend) Broadcast(string, []byte) error {
	b.mu.Lock()
	b.sent++
	b.mu.Unlock()
	return nil
}

// benchTable counts failures per address in a map: a stand-in for the
// handler's table (BenchmarkLockoutLookup measures that one's slot work).
type benchTable struct {
	mu     sync.Mutex
	counts map[Addr]int
}

func (t *benchTable) FoldFailure(a Addr, _ time.Time) (time.Time, bool) {
	t.mu.Lock()
	t.counts[a]++
	t.mu.Unlock()
	return time.Time{}, false
}

func (*benchTable) ApplyLock(Addr, time.Time) bool { return false }

// benchAddr is the i-th of many addresses.
func benchAddr(i int) Addr {
	var a Addr
	binary.BigEndian.PutUint64(a[8:], uint64(i))
	return a
}

// BenchmarkLockoutShare is a node's own work for the lockout sharing, per
// failure record, apart from the engine: "owner" parses a batch another
// node sent, folds its records and answers the confirmation; "sender"
// queues failures of addresses another node owns and makes the batches.
// Batches of 1 and 100 records separate the cost per message from the
// cost per record (the README's projection in Scaling uses both):
//
//	go test -run '^$' -bench LockoutShare ./caddyhook/cluster/
func BenchmarkLockoutShare(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("owner/records=%d", n), func(b *testing.B) {
			s := NewLockSync(&benchBackend{}, &benchTable{counts: map[Addr]int{}}, LockSyncOptions{LockTTL: time.Minute})
			var other memberID
			other[0] = 1
			recs := make([]wireRecord, n)
			now := time.Now().UnixMilli()
			msgs := make([][]byte, 64)
			for i := range msgs {
				for j := range recs {
					recs[j] = wireRecord{benchAddr(i*n + j), now}
				}
				msgs[i] = appendRecords(appendHeader(nil, kindFail, "other", other, 0), recs)
			}
			b.ReportAllocs()
			seq := uint64(0)
			for b.Loop() {
				seq++
				msg := msgs[seq%uint64(len(msgs))]
				binary.BigEndian.PutUint64(msg[4+len("other")+senderLen:], seq) // a new batch number
				s.onInbox(msg)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
		b.Run(fmt.Sprintf("sender/records=%d", n), func(b *testing.B) {
			be := &benchBackend{}
			s := NewLockSync(be, &benchTable{counts: map[Addr]int{}}, LockSyncOptions{LockTTL: time.Minute, MaxBatch: n})
			// a second member, owning every address this node sends
			var other memberID
			other[0] = 0xff
			s.members.peers[other] = &peer{seen: time.Now().Add(time.Hour)}
			s.members.rebuild()
			var addrs []Addr
			for i := 0; len(addrs) < 4096; i++ {
				if a := benchAddr(i); !s.Owns(a) {
					addrs = append(addrs, a)
				}
			}
			b.ReportAllocs()
			now := time.Now()
			i := 0
			for b.Loop() {
				for range n {
					s.Failure(addrs[i%len(addrs)], now)
					i++
				}
				out, _, _ := s.collect(true, now)
				s.mu.Lock()
				for _, o := range out {
					if bt := s.inflight[o.seq]; bt != nil {
						s.release(bt.addrs) // as the owner's confirmation would
						delete(s.inflight, o.seq)
					}
				}
				s.mu.Unlock()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}
