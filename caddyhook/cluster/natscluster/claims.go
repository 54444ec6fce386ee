package natscluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/version"
)

// claims is the idempotency store on the idem bucket: create-if-absent
// claims, settled by compare-and-set on the claim's revision.
//
// A write whose answer is a timeout or "wrong last sequence" (10164) may
// have been stored. 10164 is what a server that leads the bucket, or
// believes it does, answers at once to a write with an expected revision
// while another write of the same key is in flight there. A leader whose
// store stalled (a frozen or hung disk) goes on taking the bucket's
// writes into its log without committing them, while the other servers
// elect a new leader; until its store comes back it does not learn that it
// was deposed, and it answers every later write of such a key 10164 at
// once, before the new leader, which stores the write, answers. The
// client takes the first answer. So after either answer the key is read
// back: the value written means it was stored (TestSettleWhileBucketLeaderStalled).
type claims struct {
	s      *shared
	mu     sync.Mutex
	held   map[string]heldClaim // the claims this node holds
	behind int                  // settles and releases still being retried in the background
}

// heldClaim is a claim this node holds: its revision, and when it lapses.
type heldClaim struct {
	rev   uint64
	until time.Time
}

// record is a bucket value (sealed: see encode). Its versions
// (internal/version.IdempotencyRecord is the newest): 0, unsealed JSON (a
// release without signing_key; read until accept_unsealed_until); 1,
// sealed JSON without "v" (before v0.9.0: "t" only on settled records);
// 2, "v" and "t" on every record.
type record struct {
	V       int    `json:"v,omitempty"`
	Pending bool   `json:"p,omitempty"`
	Node    string `json:"n"`
	Until   int64  `json:"u,omitempty"` // pending: Unix ms the claim lapses
	Status  int    `json:"s,omitempty"`
	Body    []byte `json:"b,omitempty"`
	Written int64  `json:"t,omitempty"` // Unix ms it was written (version 1: settled records only)
	// Claim tells this claim from every other (pending: 16 random bytes).
	// A claim whose create answered "exists" or timed out is known to be
	// this one when the bucket holds its very bytes: without Claim, two
	// requests of one key claiming on one node in the same millisecond
	// wrote equal bytes and both took the key. Earlier releases ignore it.
	Claim []byte `json:"c,omitempty"`
}

// recordVersion is the version of the records this node writes.
const recordVersion = 2

// newerNode is the node a record of a newer release shows as its
// claimer: such a record is kept, held as a claim that lapses with the
// bucket's TTL (never taken over, never answered from).
const newerNode = "a node of a newer release"

// encode seals r for key, stamped with this version and the time.
func (c *claims) encode(key string, r record) []byte {
	r.V, r.Written = recordVersion, time.Now().UnixMilli()
	b, _ := json.Marshal(r)
	return c.s.seal(b, sealIdem, c.s.n.idem, key)
}

// decode opens and reads the value of e. It reports false for a record
// this node must not trust: one that does not open (counted and logged;
// unless it is a record of a release without signing_key, read while
// accept_unsealed_until lasts), a replay (a record stored by the server
// later than its write time allows, or a pending claim without a write
// time once every node stamps one; counted), or a settled one older than
// the bucket's TTL. A record of a newer release is kept as a claim held
// until the bucket's TTL drops it. A pending claim's end is clamped to
// the server's time of the write plus lease and clock skew, so that a
// claim from a node whose clock runs ahead lapses when the node's own
// lease would.
func (c *claims) decode(e kvEntry, lease time.Duration) (record, bool, error) {
	var r record
	b, ok := c.s.open(e.Value(), sealIdem, c.s.n.idem, e.Key())
	switch {
	case ok:
		if err := json.Unmarshal(b, &r); err != nil {
			return record{}, false, fmt.Errorf("idempotency record %s: %w", e.Key(), err)
		}
		r.V = max(r.V, 1)
	case c.s.acceptUnsealed() && json.Unmarshal(e.Value(), &r) == nil && r.V == 0 && r.Node != "":
		// written by a release without signing_key (version 0)
	default:
		c.s.reject(cluster.RejectedIdempotency, zap.String("bucket", c.s.n.idem))
		return record{}, false, nil
	}
	skew, timeout := time.Duration(c.s.cfg.ClockSkew), time.Duration(c.s.cfg.Timeout)
	written := time.UnixMilli(r.Written)
	switch {
	case r.V > recordVersion:
		c.s.newer(version.StoreIdempotency, r.V, e.Revision(), zap.String("bucket", c.s.n.idem))
		return record{Pending: true, Node: newerNode, Until: e.Created().Add(max(c.s.p.IdempotencyTTL, time.Second) + skew).UnixMilli()}, true, nil
	case r.Written != 0 && !cluster.Fresh(written, e.Created(), skew, timeout),
		r.Written == 0 && r.V == 1 && c.s.gate.AtLeast(cluster.LevelFreshRecords):
		c.s.p.Metrics.Replayed(cluster.ReplayedIdempotency, 1)
		return record{}, false, nil
	}
	if r.Written == 0 {
		written = e.Created() // a settled record of version 0
	}
	if !r.Pending && time.Since(written) > max(c.s.p.IdempotencyTTL, time.Second)+skew {
		return record{}, false, nil
	}
	if r.Pending && lease > 0 {
		r.Until = min(r.Until, e.Created().Add(lease+skew).UnixMilli())
	}
	return r, true, nil
}

func (r record) public() cluster.Record {
	rec := cluster.Record{Pending: r.Pending, Node: r.Node, Status: r.Status, Body: r.Body}
	if r.Until != 0 {
		rec.Until = time.UnixMilli(r.Until)
	}
	return rec
}

// maxClaimRounds bounds the create/get races of one Claim.
const maxClaimRounds = 8

// maxBehind bounds the settles and releases retried in the background;
// beyond it a claim whose reply could not be stored lapses by its lease.
const maxBehind = 1024

// kv is the bucket, unless the node is down or the bucket stalled.
func (c *claims) kv() (jetstream.KeyValue, error) {
	kv := c.s.idem.Load()
	if kv == nil || !c.s.up() || c.s.idemStalled.Load() {
		return nil, cluster.ErrUnavailable
	}
	return kv.KeyValue, nil
}

// Claim implements cluster.ClaimStore.
func (c *claims) Claim(ctx context.Context, key string, lease time.Time) (cluster.Record, bool, error) {
	type claimed struct {
		rec cluster.Record
		ok  bool
	}
	r, err := bounded(ctx, func(ctx context.Context) (claimed, error) {
		rec, ok, err := c.claim(ctx, key, lease)
		return claimed{rec, ok}, err
	})
	c.s.idemFailed(err)
	return r.rec, r.ok, err
}

func (c *claims) claim(ctx context.Context, key string, lease time.Time) (cluster.Record, bool, error) {
	kv, err := c.kv()
	if err != nil {
		return cluster.Record{}, false, err
	}
	mine := c.pending(key, lease)
	leaseFor := time.Until(lease)
	pause := writePause
	for round := range maxClaimRounds {
		if round > 0 && !sleepCtx(ctx, pause) {
			return cluster.Record{}, false, ctx.Err()
		}
		pause = min(2*pause, writePauseMax)
		rev, err := kv.Create(ctx, key, mine)
		if err == nil {
			c.hold(ctx, key, rev, lease)
			return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !timedOut(err) {
			return cluster.Record{}, false, err
		}
		// the key exists, or a write of it is in flight, or no answer:
		// what does the bucket hold?
		e, rerr := c.read(ctx, key, round > 0)
		switch {
		case errors.Is(rerr, jetstream.ErrKeyNotFound) || errors.Is(rerr, jetstream.ErrKeyDeleted):
			if timedOut(err) {
				return cluster.Record{}, false, err
			}
			continue // released meanwhile, or not there yet
		case rerr != nil:
			return cluster.Record{}, false, rerr
		case bytes.Equal(e.Value(), mine):
			// this create was stored though its answer said otherwise
			c.hold(ctx, key, e.Revision(), lease)
			return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
		}
		r, trusted, err := c.decode(e, leaseFor)
		if err != nil {
			return cluster.Record{}, false, err
		}
		if !trusted || r.Pending && time.Now().UnixMilli() >= r.Until {
			// not a node's record (or a stale replay), or the claiming
			// node died or gave up: take over
			if rev, err := kv.Update(ctx, key, mine, e.Revision()); err == nil {
				c.hold(ctx, key, rev, lease)
				return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
			}
			continue // the next round reads what the update did
		}
		return r.public(), false, nil
	}
	return cluster.Record{}, false, fmt.Errorf("idempotency key %s: too much contention", key)
}

// pending is the sealed record of a new claim of key until lease: no two
// are equal, even for one key, lease and millisecond on one node.
func (c *claims) pending(key string, lease time.Time) []byte {
	return c.encode(key, record{Pending: true, Node: c.s.node, Until: lease.UnixMilli(), Claim: newClaimID()})
}

// newClaimID returns the random identity of one claim.
func newClaimID() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// hold records a claim this node made (none when the caller stopped
// waiting: the claim then lapses by itself).
func (c *claims) hold(ctx context.Context, key string, rev uint64, until time.Time) {
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	if c.held == nil {
		c.held = make(map[string]heldClaim)
	}
	c.held[key] = heldClaim{rev: rev, until: until}
	c.mu.Unlock()
}

// take ends this node's hold on key.
func (c *claims) take(key string) (heldClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.held[key]
	if !ok {
		return heldClaim{}, fmt.Errorf("idempotency key %s: not claimed here", key)
	}
	delete(c.held, key)
	return h, nil
}

// errLostClaim: the claim lapsed and another node took the key over.
var errLostClaim = errors.New("idempotency claim lapsed and was taken over")

// Settle implements cluster.ClaimStore. A reply that cannot be stored in
// time (the bucket's leader stalled, an election under way) is stored in
// the background until the claim's lease ends, so that the copies waiting
// for it get it once the bucket has a leader that answers.
func (c *claims) Settle(ctx context.Context, key string, status int, body []byte) error {
	h, err := c.take(key)
	if err != nil {
		return err
	}
	val := c.encode(key, record{Node: c.s.node, Status: status, Body: body})
	return c.finish(ctx, key, h, val)
}

// Release implements cluster.ClaimStore, retried in the background as
// Settle is.
func (c *claims) Release(ctx context.Context, key string) error {
	h, err := c.take(key)
	if err != nil {
		return err
	}
	return c.finish(ctx, key, h, nil)
}

// finish writes val (nil: deletes the key) over the claim h within ctx,
// and goes on in the background until the lease ends when the outcome is
// not known by then.
func (c *claims) finish(ctx context.Context, key string, h heldClaim, val []byte) error {
	kv, err := c.kv()
	if err == nil {
		_, err = bounded(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.write(ctx, kv, key, h.rev, val) })
	}
	if err == nil || errors.Is(err, errLostClaim) {
		return err
	}
	c.s.idemFailed(err)
	c.behindDo(key, h, val)
	return err
}

// behindDo retries the write of val over the claim h in the background
// until it is known stored or the claim lapses (or the node closes).
func (c *claims) behindDo(key string, h heldClaim, val []byte) {
	c.mu.Lock()
	if c.behind >= maxBehind || time.Until(h.until) <= 0 {
		c.mu.Unlock()
		return
	}
	c.behind++
	c.mu.Unlock()
	c.s.bg.Go(func() {
		defer func() { c.mu.Lock(); c.behind--; c.mu.Unlock() }()
		ctx, cancel := context.WithDeadline(c.s.life, h.until)
		defer cancel()
		for ctx.Err() == nil {
			kv, err := c.kv()
			if err == nil {
				actx, acancel := context.WithTimeout(ctx, time.Duration(c.s.cfg.Timeout))
				err = c.write(actx, kv, key, h.rev, val)
				acancel()
				if err == nil {
					c.s.log.Info("cluster idempotency: stored after a retry", zap.String("bucket", c.s.n.idem), zap.Bool("released", val == nil))
					return
				}
				if errors.Is(err, errLostClaim) {
					return
				}
			}
			if !sleepCtx(ctx, probeRetry) {
				return
			}
		}
	})
}

// Pacing of the write and claim retries.
const (
	writePause    = 10 * time.Millisecond
	writePauseMax = 200 * time.Millisecond
)

// write replaces the claim at revision rev with val (nil: deletes it),
// retrying within ctx while the outcome is unknown: after a timeout or
// any "wrong last sequence" the key is read back, and the value written
// (for a delete: no key) means it was stored; another node's newer record
// means the claim was lost.
func (c *claims) write(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, val []byte) error {
	pause := writePause
	var err error
	for round := 0; ; round++ {
		if val == nil {
			err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
		} else {
			_, err = kv.Update(ctx, key, val, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !timedOut(err) {
			return err
		}
		e, rerr := c.read(ctx, key, round > 0)
		switch {
		case val == nil && (errors.Is(rerr, jetstream.ErrKeyNotFound) || errors.Is(rerr, jetstream.ErrKeyDeleted)):
			return nil // released
		case rerr == nil && val != nil && bytes.Equal(e.Value(), val):
			return nil // stored
		case rerr == nil && e.Revision() > rev:
			return errLostClaim // another node's newer record
		case ctx.Err() != nil:
			return err
		}
		// still the claim (or a replica behind it): again
		if !sleepCtx(ctx, pause) {
			return err
		}
		pause = min(2*pause, writePauseMax)
	}
}

// Wait pacing: the first read of a pending key follows at once, then
// the pause doubles up to waitPollMax.
const (
	waitPollFirst = 5 * time.Millisecond
	waitPollMax   = 250 * time.Millisecond
)

// Wait implements cluster.ClaimStore: it reads the key until it is
// settled, deleted, or its claim lapses. (A KV watch would be pushed the
// change, but creating one needs the cluster's metadata leader: while a
// new one is elected the creation blocked for the caller's whole
// deadline, and the waiting copy got a 409 although its twin had its
// reply in milliseconds. A read needs only one replica of the bucket.)
// Reads go through another server too when one is slow (read), and once
// the key stayed pending for half a timeout, each read asks both: a
// server whose store stalled answers reads from a replica that stopped
// following. A read that fails through both ends the wait with its
// error: the caller cannot read the key, which does not say that the
// first request is still busy.
func (c *claims) Wait(ctx context.Context, key string) (cluster.Record, bool, error) {
	pause := waitPollFirst
	start := time.Now()
	both := time.Duration(c.s.cfg.Timeout) / 2
	for {
		if _, err := c.kv(); err != nil {
			return cluster.Record{}, false, err
		}
		e, err := c.read(ctx, key, time.Since(start) >= both)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			return cluster.Record{}, false, nil // released
		case ctx.Err() != nil:
			return cluster.Record{}, false, ctx.Err()
		case err != nil:
			return cluster.Record{}, false, err
		}
		r, trusted, err := c.decode(e, 0)
		if err != nil {
			return cluster.Record{}, false, err
		}
		if !trusted {
			return cluster.Record{}, false, nil // compete again: Claim takes it over
		}
		if !r.Pending {
			return r.public(), true, nil
		}
		left := time.Until(time.UnixMilli(r.Until))
		if left <= 0 {
			return cluster.Record{}, false, nil // lapsed
		}
		if !sleepCtx(ctx, min(pause, left)) {
			return cluster.Record{}, false, ctx.Err()
		}
		pause = min(2*pause, waitPollMax)
	}
}

// hedgeAfter is how long a read through the main connection may take
// before the same read goes through the side connection too.
func (c *claims) hedgeAfter() time.Duration {
	return max(time.Duration(c.s.cfg.Timeout)/4, 50*time.Millisecond)
}

// read gets key within one timeout (and ctx) through the main connection
// and, when that is slow or fails, or when both is set, through the side
// connection (another server) too. With both, the newer of the two
// answers wins (a replica can be behind); otherwise the first answer. A
// read that fails both ways returns the main connection's error.
func (c *claims) read(ctx context.Context, key string, both bool) (kvEntry, error) {
	kv := c.s.idem.Load()
	if kv == nil {
		return nil, cluster.ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.s.cfg.Timeout))
	defer cancel()
	answers := make(chan readAnswer, 2)
	go func() {
		e, err := bounded(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
		if err != nil {
			answers <- readAnswer{err: err}
			return
		}
		answers <- readAnswer{e: e}
	}()
	sideRead := func() {
		go func() {
			e, err := c.sideGet(ctx, key)
			answers <- readAnswer{e: e, err: err, side: true}
		}()
	}
	pending := 1
	if both {
		sideRead()
		pending++
	}
	hedge := time.NewTimer(c.hedgeAfter())
	defer hedge.Stop()
	var best *readAnswer
	var mainErr error
	for pending > 0 {
		select {
		case a := <-answers:
			pending--
			if !a.side {
				mainErr = a.err
			}
			switch {
			case a.err == nil || errors.Is(a.err, jetstream.ErrKeyNotFound) || errors.Is(a.err, jetstream.ErrKeyDeleted):
				if !both {
					return a.e, a.err
				}
				if best == nil || newer(a, *best) {
					best = &a
				}
			case !a.side && !both:
				both = true // failed fast: ask another server now
				sideRead()
				pending++
			}
		case <-hedge.C:
			if !both {
				both = true
				sideRead()
				pending++
			}
		case <-ctx.Done():
			pending = 0
		}
	}
	if best != nil {
		return best.e, best.err
	}
	if mainErr == nil {
		mainErr = ctx.Err()
	}
	return nil, mainErr
}

// readAnswer is one connection's answer to a read.
type readAnswer struct {
	e    kvEntry
	err  error
	side bool
}

// newer reports whether answer a saw a later state of the key than b: a
// record beats no record, a higher revision a lower one.
func newer(a, b readAnswer) bool {
	switch {
	case a.err != nil:
		return false
	case b.err != nil:
		return true
	}
	return a.e.Revision() > b.e.Revision()
}

// sideGet reads key through the side connection.
func (c *claims) sideGet(ctx context.Context, key string) (kvEntry, error) {
	nc, err := c.s.side.conn(ctx)
	if err != nil {
		return nil, err
	}
	e, err := directGet(ctx, nc, "KV_"+c.s.n.idem, key, "$KV."+c.s.n.idem+"."+key)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// sleepCtx pauses for d; it reports false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
