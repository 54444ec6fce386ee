package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func sameEvent(t *testing.T, got, want *Event) {
	t.Helper()
	switch {
	case got.ID != want.ID, got.Kind != want.Kind, got.Path != want.Path, got.ClientIP != want.ClientIP,
		got.LastError != want.LastError, got.Attempts != want.Attempts:
		t.Fatalf("scalar fields differ:\n got %+v\nwant %+v", got, want)
	case !bytes.Equal(got.Body, want.Body):
		t.Fatalf("body differs: got %q want %q", got.Body, want.Body)
	case !got.FirstSeen.Equal(want.FirstSeen) || got.FirstSeen.IsZero() != want.FirstSeen.IsZero():
		t.Fatalf("FirstSeen: got %v want %v", got.FirstSeen, want.FirstSeen)
	case !got.NextTry.Equal(want.NextTry) || got.NextTry.IsZero() != want.NextTry.IsZero():
		t.Fatalf("NextTry: got %v want %v", got.NextTry, want.NextTry)
	case got.TraceParent != want.TraceParent || got.TraceState != want.TraceState:
		t.Fatalf("trace context: got %q %q want %q %q", got.TraceParent, got.TraceState, want.TraceParent, want.TraceState)
	case (got.Header == nil) != (want.Header == nil) || !reflect.DeepEqual(got.Header, want.Header) && len(want.Header) > 0:
		t.Fatalf("Header: got %#v want %#v", got.Header, want.Header)
	case got.PathBelowPrefix != want.PathBelowPrefix:
		t.Fatalf("PathBelowPrefix: got %q want %q", got.PathBelowPrefix, want.PathBelowPrefix)
	}
}

// forwardedEvent is a forwarded request as the module spools it.
func forwardedEvent() *Event {
	return &Event{ID: "f1", Kind: KindAgent, Path: "/hooks/github?event=pr", PathBelowPrefix: "/github?event=pr", Body: []byte("\uFEFF{\"action\":\"opened\"}"),
		FirstSeen: time.Unix(1_760_000_000, 0), Header: http.Header{
			"Idempotency-Key": {"k-1"}, "Content-Type": {"application/json"}, "X-Github-Event": {"pull_request"},
			"X-Multi": {"a", "b", ""},
		}}
}

func TestCodecForwardedHeader(t *testing.T) {
	fwd := forwardedEvent()
	b := encodeEvent(fwd)
	if b[0] != codecVersionV2 {
		t.Fatalf("a forwarded event is stored as version %d, want %d", b[0], codecVersionV2)
	}
	got, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	sameEvent(t, got, fwd)

	empty := &Event{ID: "e", Kind: KindWake, Path: "/hooks/wake", Header: http.Header{}}
	if got, err := decodeEvent(encodeEvent(empty)); err != nil || got.Header == nil || len(got.Header) != 0 {
		t.Fatalf("an empty forwarded header decodes as %#v, %v: want a non-nil empty header", got.Header, err)
	}
	rendered := &Event{ID: "r", Kind: KindAgent, Path: "/hooks/agent", Body: []byte("{}")}
	if b := encodeEvent(rendered); b[0] != codecVersion {
		t.Fatalf("a rendered event is stored as version %d, want %d (readable by older builds)", b[0], codecVersion)
	}
}

// TestCodecPathBelowPrefix: a forwarded event's path below the gateway
// prefix round-trips; it is stored only with the event's headers, and a
// record that has it without them (cut between the two) is corrupt, not
// a rendered event.
func TestCodecPathBelowPrefix(t *testing.T) {
	fwd := forwardedEvent()
	got, err := decodeEvent(encodeEvent(fwd))
	if err != nil || got.PathBelowPrefix != "/github?event=pr" {
		t.Fatalf("decoded %+v, %v: want PathBelowPrefix /github?event=pr", got, err)
	}
	rendered := &Event{ID: "r", Kind: KindAgent, Path: "/hooks/agent", PathBelowPrefix: "/agent", Body: []byte("{}")}
	b := encodeEvent(rendered)
	if got, err := decodeEvent(b); b[0] != codecVersion || err != nil || got.PathBelowPrefix != "" {
		t.Fatalf("a rendered event with PathBelowPrefix: version %d, decoded %+v, %v: want a version 1 record without it", b[0], got, err)
	}
	rec := append([]byte{codecVersionV2}, b[1:]...)
	rec = binary.AppendUvarint(rec, extBelowPrefix)
	rec = binary.AppendUvarint(rec, uint64(len("/agent")))
	rec = append(rec, "/agent"...)
	if _, err := decodeEvent(rec); !errors.Is(err, errCorrupt) {
		t.Fatalf("a path below the prefix without headers: decode = %v, want errCorrupt", err)
	}
}

func TestCodecSkipsUnknownExtensions(t *testing.T) {
	base := encodeEvent(&Event{ID: "x", Kind: KindAgent, Path: "/p", Body: []byte("{}")})
	rec := append([]byte{codecVersionV2}, base[1:]...)
	for _, ext := range []struct {
		tag uint64
		val string
	}{{1, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {2, "k=v"}, {99, "future"}} {
		rec = binary.AppendUvarint(rec, ext.tag)
		rec = binary.AppendUvarint(rec, uint64(len(ext.val)))
		rec = append(rec, ext.val...)
	}
	ev, err := decodeEvent(rec)
	if err != nil || ev.ID != "x" || ev.Header != nil {
		t.Fatalf("decode with unknown extensions: %+v, %v", ev, err)
	}
}

func TestCodecRejectsCorruptHeader(t *testing.T) {
	base := encodeEvent(&Event{ID: "x", Kind: KindAgent, Path: "/p"})
	for name, val := range map[string][]byte{
		"no marker":     []byte("\x01ab"),
		"empty name":    {0, 0, 1, 'v'},
		"truncated":     {0, 5, 'a'},
		"missing value": {0, 1, 'a'},
	} {
		rec := append([]byte{codecVersionV2}, base[1:]...)
		rec = binary.AppendUvarint(rec, extHeader)
		rec = binary.AppendUvarint(rec, uint64(len(val)))
		rec = append(rec, val...)
		if _, err := decodeEvent(rec); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decode = %v, want errCorrupt", name, err)
		}
	}
	valid := encodeEvent(forwardedEvent())
	for i := 1; i < len(valid); i++ {
		if _, err := decodeEvent(valid[:i]); !errors.Is(err, errCorrupt) {
			t.Fatalf("truncated at %d: %v, want errCorrupt", i, err)
		}
	}
}

func TestCodecRoundTrip(t *testing.T) {
	now := time.Unix(1_760_000_000, 123456789)
	tests := []struct {
		name string
		ev   Event
	}{
		{"minimal", Event{ID: "a", Kind: KindWake, Path: "/hooks/wake"}},
		{"full", Event{
			ID: "7f1c", Kind: KindAgent, Path: "/hooks/agent", Body: []byte(`{"message":"hi","deliver":false}`),
			ClientIP: "2001:db8::1", FirstSeen: now, Attempts: 7, NextTry: now.Add(time.Minute), LastError: "gateway status 503: busy",
		}},
		{"binary body", Event{ID: "b", Kind: KindAgent, Path: "/p", Body: []byte{0, 1, 2, 0xff, 0x80}}},
		{"pre-epoch time", Event{ID: "c", Kind: KindWake, Path: "/p", FirstSeen: time.Unix(-5, 7)}},
		{"large body", Event{ID: "d", Kind: KindAgent, Path: "/p", Body: bytes.Repeat([]byte("x"), 300_000)}},
		{"unicode", Event{ID: "é", Kind: KindAgent, Path: "/p", LastError: "ｅｒｒ"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEvent(encodeEvent(&tt.ev))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			sameEvent(t, got, &tt.ev)
		})
	}
}

func TestCodecDecodeCopies(t *testing.T) {
	b := encodeEvent(&Event{ID: "id", Kind: KindAgent, Path: "/p", Body: []byte("body")})
	ev, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'Z'
	}
	if ev.ID != "id" || string(ev.Body) != "body" {
		t.Fatalf("decoded event aliases its input: %+v", ev)
	}
}

func TestCodecRejectsCorrupt(t *testing.T) {
	valid := encodeEvent(&Event{ID: "id", Kind: KindAgent, Path: "/p", Body: []byte("{}"), FirstSeen: time.Unix(1, 0)})
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"version 0 (none)", append([]byte{0}, valid[1:]...)},
		{"trailing byte", append(append([]byte(nil), valid...), 0)},
		{"length past end", []byte{codecVersion, 0, 0, 0, 0x7f, 'a'}},
		{"attempts overflow", append([]byte{codecVersion, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0x0f)},
		{"bad varint", []byte{codecVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	}
	for i := 1; i < len(valid); i++ {
		tests = append(tests, struct {
			name string
			in   []byte
		}{"truncated", valid[:i]})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeEvent(tt.in); !errors.Is(err, errCorrupt) {
				t.Fatalf("decode(%x) = %v, want errCorrupt", tt.in, err)
			}
		})
	}
}

func TestTimeNanosClamp(t *testing.T) {
	tests := []struct {
		in   time.Time
		want int64
	}{
		{time.Time{}, 0},
		{time.Unix(0, 5), 5},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
	}
	for _, tt := range tests {
		if got := timeToNanos(tt.in); got != tt.want {
			t.Errorf("timeToNanos(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(encodeEvent(&Event{ID: "a", Kind: KindWake, Path: "/w", Body: []byte(`{"text":"x"}`), FirstSeen: time.Unix(9, 9)}))
	f.Add(encodeEvent(&Event{ID: "b", Kind: KindAgent, Path: "/a", Attempts: 3, LastError: "e", NextTry: time.Unix(1, 0)}))
	f.Add(encodeEvent(&Event{ID: "c", Kind: KindAgent, Path: "/a", TraceParent: testTraceParent, TraceState: "k=v"}))
	f.Add([]byte{codecVersion})
	f.Add([]byte{})
	f.Add(encodeEvent(forwardedEvent()))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := decodeEvent(b)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("error %v does not wrap errCorrupt", err)
			}
			return
		}
		again, err := decodeEvent(encodeEvent(ev))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		sameEvent(t, again, ev)
	})
}

func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add("id", "agent", "/hooks/agent", []byte(`{}`), "127.0.0.1", int64(1), int64(0), 0, "")
	f.Add("", "", "", []byte(nil), "", int64(math.MinInt64), int64(math.MaxInt64), math.MaxInt32, "x\x00y")
	f.Fuzz(func(t *testing.T, id, kind, path string, body []byte, ip string, first, next int64, attempts int, lastErr string) {
		if attempts < 0 || attempts > math.MaxInt32 {
			attempts = 0
		}
		ev := &Event{ID: id, Kind: kind, Path: path, Body: body, ClientIP: ip,
			FirstSeen: nanosToTime(first), NextTry: nanosToTime(next), Attempts: attempts, LastError: lastErr}
		got, err := decodeEvent(encodeEvent(ev))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(ev.Body) == 0 {
			ev.Body = nil
		}
		sameEvent(t, got, ev)
	})
}
