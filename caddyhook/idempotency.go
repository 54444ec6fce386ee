package caddyhook

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// maxIdempotencyKeyLen bounds the Idempotency-Key header and field.
const maxIdempotencyKeyLen = 256

const (
	idemShards        = 64
	idemEntriesPerShd = 1024    // 65,536 keys in all
	idemBytesPerShard = 1 << 19 // 32 MiB of keys and replies in all
)

// idemReply is what a replay gets back.
type idemReply struct {
	status int
	body   []byte
}

// idemEntry is one key: pending while its first request dispatches, then
// holding the reply until it expires.
type idemEntry struct {
	done    chan struct{}
	reply   idemReply
	ok      bool
	expires int64
	size    int
}

// idemSlot is one position of a shard's insertion-order ring.
type idemSlot struct {
	key string
	e   *idemEntry
}

// idemShard is one lock's worth of entries with FIFO eviction.
type idemShard struct {
	mu    sync.Mutex
	m     map[string]*idemEntry
	order []idemSlot // insertion order ring
	head  int
	bytes int
}

// idemCache remembers the replies of requests that carried an idempotency
// key so that a replay within ttl gets the first reply without a second
// dispatch. Memory is bounded by entry count and bytes per shard.
type idemCache struct {
	ttl    time.Duration
	seed   maphash.Seed
	shards [idemShards]idemShard
}

// newIdemCache returns an empty cache.
func newIdemCache(ttl time.Duration) *idemCache {
	c := &idemCache{ttl: ttl, seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*idemEntry)
		c.shards[i].order = make([]idemSlot, idemEntriesPerShd)
	}
	return c
}

// entries counts the keys held (pending or answered), for the admin API.
func (c *idemCache) entries() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (c *idemCache) shard(key string) *idemShard {
	return &c.shards[maphash.String(c.seed, key)%idemShards]
}

// idemClaim is the leader's hold on a key, ended by settle.
type idemClaim struct {
	key string
	e   *idemEntry
}

// claim returns the reply cached for key (cached=true), or makes the caller
// the leader that must dispatch and then settle the returned claim.
// Concurrent callers with the same key wait for the leader; if the leader
// fails they compete again.
func (c *idemCache) claim(ctx context.Context, key string, now time.Time) (idemReply, *idemClaim, error) {
	sh := c.shard(key)
	for {
		sh.mu.Lock()
		e := sh.m[key]
		if e != nil && e.ok && now.UnixNano() >= e.expires {
			sh.remove(key, e)
			e = nil
		}
		if e == nil {
			e = &idemEntry{done: make(chan struct{}), size: len(key)}
			sh.insert(key, e)
			sh.mu.Unlock()
			return idemReply{}, &idemClaim{key: key, e: e}, nil
		}
		sh.mu.Unlock()
		select {
		case <-e.done:
			if e.ok {
				return e.reply, nil, nil
			}
		case <-ctx.Done():
			return idemReply{}, nil, ctx.Err()
		}
	}
}

// settle ends a leader's claim: a successful reply is kept for ttl, a
// failed one is forgotten so the sender's retry dispatches again.
func (c *idemCache) settle(cl *idemClaim, reply idemReply, ok bool, now time.Time) {
	sh := c.shard(cl.key)
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
	e.reply = idemReply{status: reply.status, body: append([]byte(nil), reply.body...)}
	e.expires = now.Add(c.ttl).UnixNano()
	e.size += len(reply.body)
	sh.bytes += len(reply.body)
	e.ok = true
	close(e.done)
	sh.evictOverBudget()
}

// insert adds e under key, evicting the oldest entries past the bounds.
func (sh *idemShard) insert(key string, e *idemEntry) {
	if old := sh.order[sh.head]; old.e != nil {
		sh.remove(old.key, old.e)
	}
	sh.order[sh.head] = idemSlot{key, e}
	sh.head = (sh.head + 1) % len(sh.order)
	sh.m[key] = e
	sh.bytes += e.size
	sh.evictOverBudget()
}

// evictOverBudget drops the oldest entries while the shard is over its byte budget.
func (sh *idemShard) evictOverBudget() {
	for i := 0; sh.bytes > idemBytesPerShard && i < len(sh.order); i++ {
		at := (sh.head + i) % len(sh.order)
		if s := sh.order[at]; s.e != nil {
			sh.remove(s.key, s.e)
			sh.order[at] = idemSlot{}
		}
	}
}

// remove deletes key if it still maps to e. Removing a pending entry
// releases its followers, who then compete for the key again.
func (sh *idemShard) remove(key string, e *idemEntry) {
	if sh.m[key] != e {
		return
	}
	sh.bytes -= e.size
	delete(sh.m, key)
	if !e.ok {
		close(e.done)
	}
}

// Destruct satisfies caddy.Destructor for the usage pool.
func (c *idemCache) Destruct() error { return nil }
