// Package spool is caddyhook's durable accept store and delivery engine.
//
// A Store persists every accepted action in a bbolt file (<dir>/spool.db)
// before the ingress answers, sharing one fsync among all writers that arrive
// together (group commit), and then delivers the stored actions to the
// gateway at least once through a Sender. The event id travels as the
// Idempotency-Key so the gateway can drop the duplicates that at-least-once
// delivery implies after a crash.
//
// Events are keyed by a big-endian uint64 taken from the queue bucket's
// sequence, so key order is acceptance order. Wake events are delivered by a
// dedicated lane, strictly in that order (the head waits while it is retried);
// agent events are spread across the remaining workers, oldest ready first.
// A 2xx removes an event, a non-transient 4xx moves it to the dead-letter
// bucket with the reason, and network errors, 5xx, 408, 425 and 429 are
// retried with exponential backoff until the event is older than MaxAge.
package spool
