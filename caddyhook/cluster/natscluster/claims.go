package natscluster

import (
	"context"
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
type claims struct {
	s    *shared
	mu   sync.Mutex
	revs map[string]uint64 // revision of each claim this node holds
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
func (c *claims) decode(e jetstream.KeyValueEntry, lease time.Duration) (record, bool, error) {
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

func (c *claims) kv() (jetstream.KeyValue, error) {
	kv := c.s.idem.Load()
	if kv == nil || !c.s.up() {
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
	c.s.opFailed(err)
	return r.rec, r.ok, err
}

func (c *claims) claim(ctx context.Context, key string, lease time.Time) (cluster.Record, bool, error) {
	kv, err := c.kv()
	if err != nil {
		return cluster.Record{}, false, err
	}
	mine := c.encode(key, record{Pending: true, Node: c.s.node, Until: lease.UnixMilli()})
	leaseFor := time.Until(lease)
	for range maxClaimRounds {
		rev, err := kv.Create(ctx, key, mine)
		if err == nil {
			c.hold(ctx, key, rev)
			return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return cluster.Record{}, false, err
		}
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // released meanwhile
		}
		if err != nil {
			return cluster.Record{}, false, err
		}
		r, trusted, err := c.decode(e, leaseFor)
		if err != nil {
			return cluster.Record{}, false, err
		}
		if !trusted || r.Pending && time.Now().UnixMilli() >= r.Until {
			// not a node's record (or a stale replay), or the claiming
			// node died or gave up: take over
			rev, err := kv.Update(ctx, key, mine, e.Revision())
			if err == nil {
				c.hold(ctx, key, rev)
				return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
			}
			continue
		}
		return r.public(), false, nil
	}
	return cluster.Record{}, false, fmt.Errorf("idempotency key %s: too much contention", key)
}

// hold records the revision of a claim this node made (none when the
// caller stopped waiting: the claim then lapses by itself).
func (c *claims) hold(ctx context.Context, key string, rev uint64) {
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	if c.revs == nil {
		c.revs = make(map[string]uint64)
	}
	c.revs[key] = rev
	c.mu.Unlock()
}

func (c *claims) take(key string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rev, ok := c.revs[key]
	delete(c.revs, key)
	return rev, ok
}

// held ends this node's hold on key, returning the bucket and the
// claim's revision.
func (c *claims) held(key string) (jetstream.KeyValue, uint64, error) {
	rev, ok := c.take(key)
	if !ok {
		return nil, 0, fmt.Errorf("idempotency key %s: not claimed here", key)
	}
	kv, err := c.kv()
	return kv, rev, err
}

// errLostClaim: the claim lapsed and another node took the key over.
var errLostClaim = errors.New("idempotency claim lapsed and was taken over")

// Settle implements cluster.ClaimStore.
func (c *claims) Settle(ctx context.Context, key string, status int, body []byte) error {
	kv, rev, err := c.held(key)
	if err != nil {
		return err
	}
	val := c.encode(key, record{Node: c.s.node, Status: status, Body: body})
	if _, err := bounded(ctx, func(ctx context.Context) (uint64, error) { return kv.Update(ctx, key, val, rev) }); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return errLostClaim
		}
		c.s.opFailed(err)
		return err
	}
	return nil
}

// Release implements cluster.ClaimStore.
func (c *claims) Release(ctx context.Context, key string) error {
	kv, rev, err := c.held(key)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, kv.Delete(ctx, key, jetstream.LastRevision(rev))
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return errLostClaim
	}
	c.s.opFailed(err)
	return err
}

// Wait pacing: the first read of a pending key follows at once, then
// the pause doubles up to waitPollMax.
const (
	waitPollFirst = 5 * time.Millisecond
	waitPollMax   = 250 * time.Millisecond
)

// Wait implements cluster.ClaimStore: it reads the key until it is
// settled, deleted, or its claim lapses, each read bounded by one
// operation's timeout. (A KV watch would be pushed the change, but
// creating one needs the cluster's metadata leader: while a new one is
// elected the creation blocked for the caller's whole deadline, and the
// waiting copy got a 409 although its twin had its reply in milliseconds.
// A read needs only the bucket's own leader.)
func (c *claims) Wait(ctx context.Context, key string) (cluster.Record, bool, error) {
	pause := waitPollFirst
	for {
		kv, err := c.kv()
		if err != nil {
			return cluster.Record{}, false, err
		}
		gctx, cancel := context.WithTimeout(ctx, time.Duration(c.s.cfg.Timeout))
		e, err := bounded(gctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			return cluster.Record{}, false, nil // released
		case ctx.Err() != nil:
			return cluster.Record{}, false, ctx.Err()
		case err != nil:
			c.s.opFailed(err)
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
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return cluster.Record{}, false, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, waitPollMax)
	}
}
