package cluster

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// OutcomeWindow is how old an outcome message may be (by the time its
// sender stamped on it, beyond the clock skew) and still be read: outcomes
// go out as they happen, so an older one is a replay (or was held up
// longer than an outcome is worth: they are best effort).
const OutcomeWindow = 2 * time.Minute

// ErrReplay: a sealed message that was read before, or that is older than
// its freshness window.
var ErrReplay = errors.New("replayed message")

// OutcomeSender numbers the outcome messages of one node: a random id per
// run and a number that grows by one per message, so that the receivers
// (OutcomeReader) drop a message they have read before.
type OutcomeSender struct {
	mu   sync.Mutex
	from string
	n    uint64
}

// NewOutcomeSender returns a sender with a fresh random id.
func NewOutcomeSender() *OutcomeSender {
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &OutcomeSender{from: hex.EncodeToString(id[:])}
}

// Send encodes b as this node's next message, numbered (version 2) when
// numbered is set, else in version 1, and hands it to publish, under the
// sender's lock, so that the numbers go out in order. Nothing left to
// send (see EncodeOutcomes) publishes nothing.
func (s *OutcomeSender) Send(b OutcomeBatch, numbered bool, publish func(msg []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.From, b.N = "", 0
	if numbered {
		b.From, b.N = s.from, s.n+1
	}
	msg, ok := EncodeOutcomes(b)
	if !ok {
		return nil
	}
	if numbered {
		s.n++
	}
	return publish(msg)
}

// replayBits is how far behind the newest number of a sender a number
// may be and still be read once (messages of one sender overtaking each
// other on the way).
const replayBits = 64

// senderWindow is what a reader remembers of one sender: its newest
// number, which of the replayBits numbers below it were read, and when it
// was last heard from.
type senderWindow struct {
	top  uint64
	seen uint64 // bit i: top-i was read
	at   time.Time
}

// maxUnnumbered bounds the version 1 messages an OutcomeReader remembers
// (one 8-byte hash each).
const maxUnnumbered = 1 << 16

// OutcomeReader reads the outcome messages of one subscription: it
// decodes them (DecodeOutcomes) and drops replays. A message older than
// OutcomeWindow (plus the clock skew) is a replay. A numbered message
// (version 2) is read once per number: the reader keeps, per sender, a
// window of the last replayBits numbers, and forgets a sender once every
// message it could have sent is out of the time window. A version 1
// message (from a node of a release before v0.9.0) is read only while
// such a node may run (allowV1); it has no number, so the reader keeps a
// hash of each one it read within the time window (at most
// maxUnnumbered), and drops one it has read before.
type OutcomeReader struct {
	mu      sync.Mutex
	senders map[string]*senderWindow
	hashes  map[uint64]time.Time // version 1 messages read, by when they go stale
	pruneAt time.Time            // the next pruning
	fullAt  time.Time            // the next pruning while the hashes are at their bound
}

// NewOutcomeReader returns a reader that has read nothing.
func NewOutcomeReader() *OutcomeReader {
	return &OutcomeReader{senders: map[string]*senderWindow{}, hashes: map[uint64]time.Time{}}
}

// Read decodes msg, received at now, and checks that it is fresh: an
// error wrapping ErrReplay for a replay, ErrNewerOutcome for a version
// this build does not read, another one for a malformed message (see
// DecodeOutcomes) or a version 1 message when allowV1 is not set.
func (r *OutcomeReader) Read(msg []byte, now time.Time, skew time.Duration, allowV1 bool) (OutcomeBatch, error) {
	b, err := DecodeOutcomes(msg, now, skew)
	if err != nil {
		return b, err
	}
	if b.From == "" && !allowV1 {
		return OutcomeBatch{}, fmt.Errorf("%w: version 1, which no node of this cluster sends any more (every node runs at cluster level %d or above)",
			errOutcome, LevelFreshRecords)
	}
	keep := OutcomeWindow + skew
	if b.Time.Before(now.Add(-keep)) {
		return OutcomeBatch{}, fmt.Errorf("%w: outcome message sent %s ago, more than %s", ErrReplay, now.Sub(b.Time).Round(time.Second), keep)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune(now, keep+skew)
	if b.From == "" {
		sum := sha256.Sum256(msg)
		h := binary.BigEndian.Uint64(sum[:8])
		if _, ok := r.hashes[h]; ok {
			return OutcomeBatch{}, fmt.Errorf("%w: outcome message read before", ErrReplay)
		}
		if len(r.hashes) < maxUnnumbered {
			r.hashes[h] = b.Time.Add(keep)
		}
		return b, nil
	}
	w := r.senders[b.From]
	if w == nil {
		r.senders[b.From] = &senderWindow{top: b.N, seen: 1, at: now}
		return b, nil
	}
	switch {
	case b.N > w.top:
		if shift := b.N - w.top; shift < replayBits {
			w.seen = w.seen<<shift | 1
		} else {
			w.seen = 1
		}
		w.top = b.N
	case w.top-b.N >= replayBits:
		return OutcomeBatch{}, fmt.Errorf("%w: outcome message %d of %s, %d behind its newest", ErrReplay, b.N, b.From, w.top-b.N)
	case w.seen&(1<<(w.top-b.N)) != 0:
		return OutcomeBatch{}, fmt.Errorf("%w: outcome message %d of %s read before", ErrReplay, b.N, b.From)
	default:
		w.seen |= 1 << (w.top - b.N)
	}
	w.at = now
	return b, nil
}

// prune forgets the senders not heard from for forget and the hashes
// gone stale: every quarter of forget, or every second while the hashes
// are at their bound; r.mu is held.
func (r *OutcomeReader) prune(now time.Time, forget time.Duration) {
	if now.Before(r.pruneAt) && (len(r.hashes) < maxUnnumbered || now.Before(r.fullAt)) {
		return
	}
	r.pruneAt, r.fullAt = now.Add(forget/4), now.Add(time.Second)
	for id, w := range r.senders {
		if now.Sub(w.at) > forget {
			delete(r.senders, id)
		}
	}
	for h, stale := range r.hashes {
		if now.After(stale) {
			delete(r.hashes, h)
		}
	}
}
