package adminapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// TestDeadLetterRoundTrip: a dead letter listed with its body comes back
// as the same event (the fields the list carries), whether its body is
// compact JSON (sent as JSON) or anything else (sent as text), through
// the JSON the admin API answers with.
func TestDeadLetterRoundTrip(t *testing.T) {
	first := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, body := range []string{`{"message":"m"}`, "{ \"spaced\": 1 }", "\ufeff{}", "not json", ""} {
		ev := &spool.Event{ID: "e1", Kind: spool.KindAgent, Path: "/hooks/agent", LastError: "gateway status 500",
			Attempts: 3, FirstSeen: first, ClientIP: "192.0.2.1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			Body: []byte(body)}
		d := DeadLetterOf(ev, true)
		if (d.Body != nil) == (d.BodyText != "") && body != "" {
			t.Fatalf("%q: body %q, text %q: want exactly one", body, d.Body, d.BodyText)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back DeadLetter
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := back.Event()
		if string(got.Body) != body || got.ID != ev.ID || got.Kind != ev.Kind || got.Path != ev.Path ||
			got.LastError != ev.LastError || got.Attempts != ev.Attempts || !got.FirstSeen.Equal(first) ||
			got.ClientIP != ev.ClientIP || got.TraceParent != ev.TraceParent {
			t.Fatalf("%q: came back as %+v", body, got)
		}
		if short := DeadLetterOf(ev, false); short.Body != nil || short.BodyText != "" || short.BodyBytes != len(body) {
			t.Fatalf("%q without body: %+v", body, short)
		}
	}
}

// TestSpoolStatsRoundTrip: the counters and the rate of a spool's state
// survive the wire (the settings stay with the handler), and a read
// error is the summary's error.
func TestSpoolStatsRoundTrip(t *testing.T) {
	in := spool.Stats{Depth: 3, InFlight: 1, Dead: 2, Bytes: 4096, MaxBytes: 1 << 20, OldestAge: 1500 * time.Millisecond,
		Paused: true, Rate: spool.Rate{Count: 5, Interval: time.Second}}
	sp := SpoolOf("/var/spool/hooks", in, nil)
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	var back Spool
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Stats(); !reflect.DeepEqual(got, in) {
		t.Fatalf("stats %+v, want %+v", got, in)
	}
	if back.Dir != "/var/spool/hooks" || back.Error != "" {
		t.Fatalf("spool %+v", back)
	}
	if e := SpoolOf("cluster:hooks", spool.Stats{}, errTest("nats: no servers")); e.Error != "nats: no servers" {
		t.Fatalf("error %q", e.Error)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
