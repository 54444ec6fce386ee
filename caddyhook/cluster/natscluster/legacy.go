package natscluster

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// A release without signing_key (before 486155d) wrote a queued event as
// an unsealed message whose headers carry the event's fields and whose
// data is the gateway body; a dead letter adds the reason, the gateway's
// status and the attempts. This is version 0 of the queue's format: read
// while accept_unsealed_until lasts, so that moving a cluster to
// signing_key drops none of the events such a release queued.
const (
	legacyID        = "Hooks-Id"
	legacyKind      = "Hooks-Kind"
	legacyPath      = "Hooks-Path"
	legacyClientIP  = "Hooks-Client-Ip"
	legacyFirstSeen = "Hooks-First-Seen"
	legacyReason    = "Hooks-Reason"
	legacyAttempts  = "Hooks-Attempts"
)

// legacyUnreadable is the id prefix such a release gave a message it
// could not read, which it moved to the dead letters with the message's
// data as the body (a sealed event, when a node with signing_key queued
// it): restoreKept reads the event inside.
const legacyUnreadable = "unreadable-"

// isLegacy reports whether a message that did not open is one of a
// release without signing_key (it has the event headers).
func isLegacy(h nats.Header) bool { return h != nil && h.Get(legacyID) != "" }

// decodeLegacy reads an event of version 0 from its headers and data.
func decodeLegacy(h nats.Header, data []byte) (*spool.Event, error) {
	ev := &spool.Event{ID: h.Get(legacyID), Kind: h.Get(legacyKind), Path: h.Get(legacyPath), ClientIP: h.Get(legacyClientIP),
		LastError: h.Get(legacyReason)}
	if len(data) > 0 {
		ev.Body = append([]byte(nil), data...)
	}
	t, err := time.Parse(time.RFC3339Nano, h.Get(legacyFirstSeen))
	if err != nil || ev.Path == "" || (ev.Kind != spool.KindWake && ev.Kind != spool.KindAgent) {
		return nil, fmt.Errorf("%w: a message of a release without signing_key lacks the event headers", spool.ErrInvalidEvent)
	}
	ev.FirstSeen = t
	if a := h.Get(legacyAttempts); a != "" {
		if ev.Attempts, err = strconv.Atoi(a); err != nil || ev.Attempts < 0 {
			return nil, fmt.Errorf("%w: attempts %q", spool.ErrInvalidEvent, a)
		}
	}
	return ev, nil
}

// restoreKept reads the event inside a dead letter of version 0 that a
// release without signing_key made of a sealed message it could not read
// (a node with signing_key had queued it): the event, with the reason;
// nil when ev is not one.
func (q *queue) restoreKept(ev *spool.Event) *spool.Event {
	if !strings.HasPrefix(ev.ID, legacyUnreadable) || ev.Path != "?" {
		return nil
	}
	for _, subject := range []string{q.s.n.queueAgent, q.s.n.queueWake} {
		b, ok := q.s.open(ev.Body, sealQueue, subject)
		if !ok {
			continue
		}
		inner, err := spool.UnmarshalEvent(b)
		if err != nil || q.subject(inner.Kind) != subject {
			return nil
		}
		inner.LastError = spool.Clip("kept by a node without signing_key: " + ev.LastError)
		inner.Attempts = ev.Attempts
		return inner
	}
	return nil
}
