// Package cluster lets several caddyhook instances share their lockout,
// idempotency and durable queue through a distributed engine.
//
// The engine (NATS JetStream today, package natscluster) is a Caddy guest
// module in the namespace http.handlers.hooks.cluster implementing Engine;
// it hands out a Backend per namespace name. The rest of this package is
// engine-agnostic and sits between the handler and the Backend:
//
//   - LockSync shares the lockout: each address's count is owned by one
//     node (rendezvous hashing over the members, who announce themselves
//     through Members), the other nodes send it their failures of that
//     address in batches and hold an address back while two of its
//     failures are unconfirmed; only locks reach every node (a bucket with
//     a TTL that starting or reconnecting nodes read back). The
//     per-request check stays local and network-free.
//   - Idempotency claims a key cluster-wide before a dispatch, stores the
//     first reply and makes a concurrent duplicate on another node wait
//     for it (ErrBusy when it cannot within its deadline).
//   - Spool accepts events into the replicated queue, or into a local
//     bbolt fallback spool while the engine is unreachable, which drains
//     into the queue (deduplicated by event id) when it is back.
//
// Events are spool.Event values, and delivery uses spool.Sender, so the
// handler's gateway sender serves the local and the cluster spool alike.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// Namespace is the Caddy module namespace of cluster engines; a handler's
// config selects one with the inline key "engine".
const Namespace = "http.handlers.hooks.cluster"

// Errors shared by every engine.
var (
	// ErrUnavailable: the engine cannot be reached (or has no quorum) now.
	ErrUnavailable = errors.New("cluster unavailable")
	// ErrFull: the queue is at its configured size limit.
	ErrFull = errors.New("cluster queue full")
	// ErrUnconfirmed: events were sent but their acknowledgement did not
	// arrive in time (a server stopped or cut off mid-request): they may
	// be in the queue, and delivered, or not. ErrUnavailable and ErrFull
	// mean that none of them was stored.
	ErrUnconfirmed = errors.New("cluster did not confirm in time; the events may have been stored")
	// ErrTooLarge: an event is larger than the engine takes in one
	// message (NATS's max_payload): nothing was stored, and a retry of
	// the same request cannot succeed (not "unavailable").
	ErrTooLarge = errors.New("event larger than the cluster takes in one message")
	// ErrBusy: an idempotency key is held by a dispatch in progress on
	// another node that did not finish within the wait deadline.
	ErrBusy = errors.New("idempotency key in use by a dispatch in progress")
)

// PayloadLimit is implemented by a Backend whose messages have a size
// limit: MaxPayload is the largest message the servers take, in bytes
// (0 when not known yet). The handler checks its body limits against it.
type PayloadLimit interface {
	MaxPayload() int64
}

// Engine is implemented by cluster engine modules.
type Engine interface {
	// Open returns the backend of p.Name, shared by every Open of the same
	// engine settings and parameters (across config reloads); Close
	// releases one reference.
	Open(p Params) (Backend, error)
}

// Secrets is implemented by an engine's config whose fields may hold
// {env.…} or {file.…} placeholders that must expand to something (its
// credentials, signing keys, their files). The handler reads the config
// (without provisioning it) and checks these with its own, so that one
// error names every empty one of a config (caddy validate) rather than
// one per run.
type Secrets interface {
	SecretFields() []SecretField
}

// SecretField is one such field: its name as the engine's errors show it
// ("cluster nats: password"), its raw value, and Each: every placeholder
// in it must expand (a path or address), else the whole value must (a
// secret).
type SecretField struct {
	Name, Raw string
	Each      bool
}

// Params are what the handler decides about a backend.
type Params struct {
	// Name namespaces every stream, bucket and subject; an engine's own
	// configured name takes precedence over this default.
	Name string
	// LockTTL bounds how long a lock record lives (the longest possible
	// lock of the handler's lockout policy).
	LockTTL time.Duration
	// IdempotencyTTL is how long a settled reply is kept.
	IdempotencyTTL time.Duration
	// Queue, when set, provisions the replicated queue and dead letters.
	Queue *QueueParams
	// Logger receives the engine's state changes.
	Logger *zap.Logger
	// Metrics, when set, counts the records the engine refused to trust.
	Metrics *Metrics
}

// DefaultClockSkew is how far ahead of a node's own clock the times it
// reads from other nodes may be, unless the engine is configured
// otherwise; MaxClockSkew bounds the setting.
const (
	DefaultClockSkew = 2 * time.Second
	MaxClockSkew     = 10 * time.Minute
)

// QueueParams configure the replicated queue.
type QueueParams struct {
	MaxBytes     int64         // queue size limit (0 = unlimited); full → ErrFull
	MaxAge       time.Duration // events older than this are dead-lettered at delivery
	RetryInitial time.Duration // first redelivery delay after a 5xx or network error
	RetryMax     time.Duration // redelivery delay ceiling
	AckWait      time.Duration // a delivery node silent this long loses its event to another
	// MaxIdentical: identical answers in a row that a retry does not
	// change (spool.Repeatable) before an event is dead-lettered (0: the
	// spool's default), counted by each delivery node
	MaxIdentical int
}

// Backend is one namespace of a connected engine.
type Backend interface {
	// Node identifies this process among the nodes (stable while it runs).
	Node() string
	// Name is the namespace in use (the engine's own name setting, else
	// Params.Name).
	Name() string
	// Up reports whether the engine is reachable now (connected, and
	// answering: not cut off, not without quorum).
	Up() bool
	// Timeout bounds one engine operation (the engine's own setting).
	Timeout() time.Duration
	// Watch calls fn (from its own goroutine, in order) on every change of
	// Up; the returned func stops the calls.
	Watch(fn func(up bool)) (stop func())
	// ClockSkew is how far ahead of this node's clock a time read from
	// another node may be; later times are clamped to it.
	ClockSkew() time.Duration
	// Gate is the namespace's cluster version gate, which the members of
	// every role (Members) tell the levels they announce; nil: none (the
	// behaviours it gates stay off).
	Gate() *Gate

	// Broadcast sends msg, best effort, to every Subscribe of topic in
	// this namespace on every node (this one included). A topic is one to
	// eight dot-separated words of a-z and 0-9 (TopicLockout,
	// TopicDelivery, LockoutInbox).
	Broadcast(topic string, msg []byte) error
	// Subscribe delivers the broadcasts on topic until stop is called.
	Subscribe(topic string, fn func(msg []byte)) (stop func(), err error)

	// PutLock records a lock under key for ttl.
	PutLock(ctx context.Context, key string, val []byte, ttl time.Duration) error
	// WatchLocks delivers every live lock record and then each new one,
	// with the engine's time of its write (for the freshness check),
	// catching up by itself after a reconnection, until stop is called.
	WatchLocks(fn func(val []byte, stored time.Time)) (stop func(), err error)

	// Claims is the idempotency store.
	Claims() ClaimStore
	// Queue is the replicated queue (nil unless Params.Queue was set).
	Queue() QueueStore

	// Close releases this reference.
	Close() error
}

// Describer is a Backend that tells the settings its connection runs
// with (the admin API shows them, so that an operator sees what a reload
// applied): names, addresses and files, never a secret (a secret shows as
// its placeholder, or "literal").
type Describer interface {
	Settings() map[string]string
}

// Record is an idempotency key's state.
type Record struct {
	Pending bool      // a dispatch holds the key
	Node    string    // the node that claimed it
	Until   time.Time // pending: when the claim lapses unless settled
	Status  int       // settled: the reply's status …
	Body    []byte    // … and body
}

// ClaimStore holds idempotency records with the IdempotencyTTL.
type ClaimStore interface {
	// Claim creates key as pending until lease if it is absent (or its
	// pending claim lapsed) and reports claimed; else it returns the
	// current record.
	Claim(ctx context.Context, key string, lease time.Time) (rec Record, claimed bool, err error)
	// Settle stores the first reply under a claimed key.
	Settle(ctx context.Context, key string, status int, body []byte) error
	// Release gives up a claimed key (the dispatch failed) so that a retry
	// dispatches again.
	Release(ctx context.Context, key string) error
	// Wait returns once key is no longer pending: its settled record (ok)
	// or, when it was released or lapsed, ok false.
	Wait(ctx context.Context, key string) (rec Record, ok bool, err error)
}

// QueueStats describes the replicated queue.
type QueueStats struct {
	Depth       uint64 // events queued (in flight included)
	Bytes       uint64 // bytes held by the queue stream
	DeadLetters uint64 // dead letters held
	// InFlight: handed to a delivery node and not settled yet (waiting
	// to be retried included), cluster-wide; Pending: not handed to any
	// node yet.
	InFlight, Pending uint64
	// Oldest is when the oldest queued event was stored (zero: none).
	Oldest time.Time
	// AckWait is how long a delivery node may hold an event silently
	// before it goes to another.
	AckWait time.Duration
}

// QueueStore is the replicated queue.
type QueueStore interface {
	// Publish stores events (each deduplicated by its ID) and returns once
	// every one is acknowledged by the engine with its replicas. ErrFull and
	// ErrUnavailable mean none was stored; ErrUnconfirmed that some may
	// have been (sent, not acknowledged in time).
	Publish(ctx context.Context, evs ...*spool.Event) error
	// SetSender starts (or retargets, or with nil stops) delivery from this
	// node with workers goroutines (one of them for the ordered wake lane,
	// which one delivery node at a time serves).
	SetSender(snd spool.Sender, workers int)
	// SetLimiter paces this node's sends (nil: unpaced).
	SetLimiter(l Limiter)
	// DeadLetters lists the dead letters (Seq is the engine's id of the
	// record, LastError the reason).
	DeadLetters(ctx context.Context) ([]*spool.Event, error)
	// Retry requeues the dead letters with these ids (all when none).
	Retry(ctx context.Context, ids ...string) (int, error)
	// Drop deletes the dead letters with these ids (all when none).
	Drop(ctx context.Context, ids ...string) (int, error)
	// Stats reads the queue's counters from the engine.
	Stats(ctx context.Context) (QueueStats, error)
	// Counters are this node's delivery counters since it started.
	Counters() DeliveryCounters
}

// DeliveryCounters are a delivery node's own counts.
type DeliveryCounters struct {
	Delivered, Redeliveries, DeadLettered uint64
	// Ready: its delivery lanes are subscribed, waiting for events.
	Ready bool
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateName checks a namespace name: 1–64 of A–Z a–z 0–9 _ -.
func ValidateName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("name %q: use 1 to 64 of A-Z a-z 0-9 _ -", name)
	}
	return nil
}

// NameFromPath derives a default namespace name from a base path:
// "/hooks" → "hooks", "/a/b.c" → "a_b_c".
func NameFromPath(base string) string {
	n := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, strings.Trim(base, "/"))
	if n == "" {
		n = "hooks"
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}
