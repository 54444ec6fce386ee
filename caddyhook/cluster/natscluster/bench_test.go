package natscluster

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// BenchmarkQueueMessage is the cost of making and of reading one queued
// event of a typical size (a forwarded GitHub delivery of about 1 KiB
// with its headers), with the seal and without, side by side:
//
//	go test -run '^$' -bench QueueMessage ./caddyhook/cluster/natscluster/
func BenchmarkQueueMessage(b *testing.B) {
	kr, err := cluster.NewKeyring([]string{testSigningKey})
	if err != nil {
		b.Fatal(err)
	}
	q := &queue{s: &shared{cfg: &Config{keyring: kr, ClockSkew: 2e9}, n: namesFor("bench")}}
	body := make([]byte, 0, 1024)
	body = append(body, `{"action":"opened","number":7,"pull_request":{"title":"`...)
	for len(body) < 1000 {
		body = append(body, "a realistic title "...)
	}
	body = append(body, `"}}`...)
	ev := &spool.Event{ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Kind: spool.KindAgent, Path: "/hooks/github?event=pr",
		Body: body, FirstSeen: time.Now(), TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Header: http.Header{"X-Github-Event": {"pull_request"}, "Idempotency-Key": {"72d2b4b0-1c1f-11ef-9f6c-1a2b3c4d5e6f"},
			"Content-Type": {"application/json"}, "User-Agent": {"GitHub-Hookshot/1a2b3c4"}}}
	subject := q.subject(ev.Kind)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = spool.MarshalEvent(ev)
		}
	})
	b.Run("encode+seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = q.encode(ev, subject, ev.ID)
		}
	})
	raw := spool.MarshalEvent(ev)
	sealed := q.encode(ev, subject, ev.ID).Data
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := spool.UnmarshalEvent(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open+decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := q.decode(subject, nil, sealed, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
