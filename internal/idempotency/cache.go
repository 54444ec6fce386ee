// Package idempotency is the idempotency cache of the hooks handler: the
// first reply of each idempotency key, kept for a TTL, so that a replay
// gets that reply without a second dispatch, and a concurrent duplicate
// waits for the first request instead of dispatching too. Memory is
// bounded by entry count and bytes per shard, whatever the keys.
package idempotency

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

const (
	numShards       = 64
	entriesPerShard = 1024    // 65,536 keys in all
	bytesPerShard   = 1 << 19 // 32 MiB of keys and replies in all
)

// Reply is what a replay gets back.
type Reply struct {
	Status int
	Body   []byte
}

// entry is one key: pending while its first request dispatches, then
// holding the reply until it expires.
type entry struct {
	done    chan struct{}
	reply   Reply
	ok      bool
	expires int64
	size    int
}

// slot is one position of a shard's insertion-order ring.
type slot struct {
	key string
	e   *entry
}

// shard is one lock's worth of entries with FIFO eviction.
type shard struct {
	mu    sync.Mutex
	m     map[string]*entry
	order []slot // insertion order ring
	head  int
	bytes int
}

// Cache remembers the replies of requests that carried an idempotency
// key so that a replay within ttl gets the first reply without a second
// dispatch. Memory is bounded by entry count and bytes per shard.
type Cache struct {
	ttl    time.Duration
	seed   maphash.Seed
	shards [numShards]shard
}

// New returns an empty cache.
func New(ttl time.Duration) *Cache {
	c := &Cache{ttl: ttl, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*entry)
		c.shards[i].order = make([]slot, entriesPerShard)
	}
	return c
}

// Len counts the keys held (pending or answered), for the admin API.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (c *Cache) shardOf(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%numShards]
}

// Claim is the leader's hold on a key, ended by Settle.
type Claim struct {
	key string
	e   *entry
}

// Claim returns the reply cached for key (a nil *Claim), or makes the caller
// the leader that must dispatch and then Settle the returned claim.
// Concurrent callers with the same key wait for the leader; if the leader
// fails they compete again.
func (c *Cache) Claim(ctx context.Context, key string, now time.Time) (Reply, *Claim, error) {
	sh := c.shardOf(key)
	for {
		sh.mu.Lock()
		e := sh.m[key]
		if e != nil && e.ok && now.UnixNano() >= e.expires {
			sh.remove(key, e)
			e = nil
		}
		if e == nil {
			e = &entry{done: make(chan struct{}), size: len(key)}
			sh.insert(key, e)
			sh.mu.Unlock()
			return Reply{}, &Claim{key: key, e: e}, nil
		}
		sh.mu.Unlock()
		select {
		case <-e.done:
			if e.ok {
				return e.reply, nil, nil
			}
		case <-ctx.Done():
			return Reply{}, nil, ctx.Err()
		}
	}
}

// Settle ends a leader's claim: a successful reply is kept for ttl, a
// failed one is forgotten so the sender's retry dispatches again.
func (c *Cache) Settle(cl *Claim, reply Reply, ok bool, now time.Time) {
	sh := c.shardOf(cl.key)
	e := cl.e
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[cl.key] != e {
		return // evicted meanwhile; remove already released the followers
	}
	if !ok {
		sh.remove(cl.key, e)
		return
	}
	e.reply = Reply{Status: reply.Status, Body: append([]byte(nil), reply.Body...)}
	e.expires = now.Add(c.ttl).UnixNano()
	e.size += len(reply.Body)
	sh.bytes += len(reply.Body)
	e.ok = true
	close(e.done)
	sh.evictOverBudget()
}

// insert adds e under key, evicting the oldest entries past the bounds.
func (sh *shard) insert(key string, e *entry) {
	if old := sh.order[sh.head]; old.e != nil {
		sh.remove(old.key, old.e)
	}
	sh.order[sh.head] = slot{key, e}
	sh.head = (sh.head + 1) % len(sh.order)
	sh.m[key] = e
	sh.bytes += e.size
	sh.evictOverBudget()
}

// evictOverBudget drops the oldest entries while the shard is over its byte budget.
func (sh *shard) evictOverBudget() {
	for i := 0; sh.bytes > bytesPerShard && i < len(sh.order); i++ {
		at := (sh.head + i) % len(sh.order)
		if s := sh.order[at]; s.e != nil {
			sh.remove(s.key, s.e)
			sh.order[at] = slot{}
		}
	}
}

// remove deletes key if it still maps to e. Removing a pending entry
// releases its followers, who then compete for the key again.
func (sh *shard) remove(key string, e *entry) {
	if sh.m[key] != e {
		return
	}
	sh.bytes -= e.size
	delete(sh.m, key)
	if !e.ok {
		close(e.done)
	}
}

// TTL is how long a reply is kept.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Destruct satisfies caddy.Destructor for the usage pool.
func (c *Cache) Destruct() error { return nil }
