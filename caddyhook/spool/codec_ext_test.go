package spool

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestCodecVersions: a record without extensions is written as version 1
// (readable by builds before version 2), one with a trace context as
// version 2, and both decode.
func TestCodecVersions(t *testing.T) {
	base := Event{ID: "id", Kind: KindAgent, Path: "/hooks/agent", Body: []byte(`{"message":"m"}`),
		FirstSeen: time.Unix(1_760_000_000, 5), Attempts: 2, LastError: "gateway status 503: busy"}
	tests := []struct {
		name        string
		parent      string
		state       string
		wantVersion byte
	}{
		{"no trace", "", "", codecVersion},
		{"traceparent", testTraceParent, "", codecVersionV2},
		{"both", testTraceParent, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", codecVersionV2},
		{"tracestate only", "", "k=v", codecVersionV2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := base
			ev.TraceParent, ev.TraceState = tt.parent, tt.state
			b := encodeEvent(&ev)
			if b[0] != tt.wantVersion {
				t.Fatalf("version byte %d, want %d", b[0], tt.wantVersion)
			}
			got, err := decodeEvent(b)
			if err != nil {
				t.Fatal(err)
			}
			sameEvent(t, got, &ev)
		})
	}
}

// TestCodecReadsVersion1: a record as the version 1 encoder wrote it
// (built here byte by byte) still decodes.
func TestCodecReadsVersion1(t *testing.T) {
	b := []byte{1}
	b = binary.AppendVarint(b, time.Unix(7, 0).UnixNano())
	b = binary.AppendVarint(b, 0)
	b = binary.AppendUvarint(b, 3)
	for _, f := range []string{"ev-1", KindWake, "/hooks/wake", "10.0.0.1", "why", `{"text":"t"}`} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	ev, err := decodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Event{ID: "ev-1", Kind: KindWake, Path: "/hooks/wake", ClientIP: "10.0.0.1", LastError: "why",
		Body: []byte(`{"text":"t"}`), FirstSeen: time.Unix(7, 0), Attempts: 3}
	sameEvent(t, ev, want)
}

// TestCodecExtensions: unknown tags are skipped, a malformed extension is
// corrupt, and version 1 admits no extension bytes.
func TestCodecExtensions(t *testing.T) {
	ev := &Event{ID: "id", Kind: KindAgent, Path: "/p", TraceParent: testTraceParent}
	v2 := encodeEvent(ev)
	ext := func(b []byte, tag uint64, val string) []byte {
		b = binary.AppendUvarint(append([]byte(nil), b...), tag)
		b = binary.AppendUvarint(b, uint64(len(val)))
		return append(b, val...)
	}
	got, err := decodeEvent(ext(v2, 99, "from a newer build"))
	if err != nil {
		t.Fatalf("unknown tag: %v", err)
	}
	sameEvent(t, got, ev)

	v1 := encodeEvent(&Event{ID: "id", Kind: KindAgent, Path: "/p"})
	for name, b := range map[string][]byte{
		"extension in version 1": ext(v1, extTraceParent, testTraceParent),
		"tag without length":     binary.AppendUvarint(append([]byte(nil), v2...), extTraceState),
		"length past end":        append(binary.AppendUvarint(binary.AppendUvarint(append([]byte(nil), v2...), extTraceState), 50), 'x'),
	} {
		if _, err := decodeEvent(b); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", name, err)
		}
	}
}
