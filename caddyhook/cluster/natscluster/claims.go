package natscluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// claims is the idempotency store on the idem bucket: create-if-absent
// claims, settled by compare-and-set on the claim's revision.
type claims struct {
	s    *shared
	mu   sync.Mutex
	revs map[string]uint64 // revision of each claim this node holds
}

// record is a bucket value.
type record struct {
	Pending bool   `json:"p,omitempty"`
	Node    string `json:"n"`
	Until   int64  `json:"u,omitempty"` // pending: Unix ms the claim lapses
	Status  int    `json:"s,omitempty"`
	Body    []byte `json:"b,omitempty"`
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
	kv, err := c.kv()
	if err != nil {
		return cluster.Record{}, false, err
	}
	mine, _ := json.Marshal(record{Pending: true, Node: c.s.node, Until: lease.UnixMilli()})
	for range maxClaimRounds {
		rev, err := kv.Create(ctx, key, mine)
		if err == nil {
			c.hold(key, rev)
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
		var r record
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			return cluster.Record{}, false, fmt.Errorf("idempotency record %s: %w", key, err)
		}
		if r.Pending && time.Now().UnixMilli() >= r.Until {
			// the claiming node died or gave up: take over
			rev, err := kv.Update(ctx, key, mine, e.Revision())
			if err == nil {
				c.hold(key, rev)
				return cluster.Record{Pending: true, Node: c.s.node, Until: lease}, true, nil
			}
			continue
		}
		return r.public(), false, nil
	}
	return cluster.Record{}, false, fmt.Errorf("idempotency key %s: too much contention", key)
}

func (c *claims) hold(key string, rev uint64) {
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
	val, _ := json.Marshal(record{Node: c.s.node, Status: status, Body: body})
	if _, err := kv.Update(ctx, key, val, rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return errLostClaim
		}
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
	err = kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return errLostClaim
	}
	return err
}

// Wait implements cluster.ClaimStore: it watches the key until it is
// settled, deleted, or its claim lapses.
func (c *claims) Wait(ctx context.Context, key string) (cluster.Record, bool, error) {
	kv, err := c.kv()
	if err != nil {
		return cluster.Record{}, false, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(wctx, key)
	if err != nil {
		return cluster.Record{}, false, err
	}
	defer func() { _ = w.Stop() }()
	var lapse <-chan time.Time
	seen := false
	for {
		select {
		case <-ctx.Done():
			return cluster.Record{}, false, ctx.Err()
		case <-lapse:
			return cluster.Record{}, false, nil
		case e, ok := <-w.Updates():
			if !ok {
				return cluster.Record{}, false, cluster.ErrUnavailable
			}
			if e == nil {
				if !seen {
					return cluster.Record{}, false, nil // gone already
				}
				continue // the current value was delivered; wait for changes
			}
			seen = true
			if e.Operation() != jetstream.KeyValuePut {
				return cluster.Record{}, false, nil // released
			}
			var r record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return cluster.Record{}, false, fmt.Errorf("idempotency record %s: %w", key, err)
			}
			if !r.Pending {
				return r.public(), true, nil
			}
			t := time.NewTimer(time.Until(time.UnixMilli(r.Until)))
			defer t.Stop()
			lapse = t.C
		}
	}
}
