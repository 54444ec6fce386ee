package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"time"
)

// Record versions, the first byte of every stored record. Version 2 is
// version 1 followed by extension fields; a record without any is still
// written as version 1, so an older build can read it.
const (
	codecVersion   byte = 1
	codecVersionV2 byte = 2
)

// Extension tags of a version 2 record. A decoder skips tags it does not
// know, so fields can be added without another version.
const (
	extTraceParent uint64 = 1 // W3C traceparent of the accepted request
	extTraceState  uint64 = 2 // W3C tracestate of the accepted request
	extHeader      uint64 = 3 // a forwarded event's request headers
	extBelowPrefix uint64 = 4 // a forwarded event's path below the gateway prefix
)

// errCorrupt is wrapped by decodeEvent for any malformed record.
var errCorrupt = errors.New("corrupt spool record")

// ErrNewer is wrapped (by a *NewerError) when a record's version is
// newer than this build reads: a newer release wrote it. The stores keep
// such a record where it is, unread, for that release (a rollback loses
// nothing); it is not corrupt.
var ErrNewer = errors.New("record written by a newer release")

// NewerError is a record of a newer version than this build reads.
type NewerError struct {
	Version int // the record's version
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("spool record version %d, newer than this build reads (%d)", e.Version, codecVersionV2)
}

// Unwrap makes errors.Is(err, ErrNewer) hold.
func (e *NewerError) Unwrap() error { return ErrNewer }

// NewerVersion is the version of the record err is about when err is a
// *NewerError, and ok.
func NewerVersion(err error) (version int, ok bool) {
	if ne, ok := errors.AsType[*NewerError](err); ok {
		return ne.Version, true
	}
	return 0, false
}

// encodeEvent serialises ev into the stored record format:
//
//	version(1) firstSeen(varint ns) nextTry(varint ns) attempts(uvarint)
//	id kind path clientIP lastError body   (each uvarint length + bytes)
//
// A zero time is stored as 0. Seq is not stored: it is the record's key.
// Version 2 appends extension fields to the end of the record, each
//
//	tag(uvarint) length(uvarint) bytes
//
// and is written only when there is one (empty fields are left out).
func encodeEvent(ev *Event) []byte {
	below := ev.PathBelowPrefix
	if ev.Header == nil {
		below = "" // a forwarded event's field only
	}
	exts := [...]struct {
		tag uint64
		val []byte
	}{{extTraceParent, []byte(ev.TraceParent)}, {extTraceState, []byte(ev.TraceState)},
		{extBelowPrefix, []byte(below)}, {extHeader, encodeHeader(ev.Header)}} // the header last: see event
	version, extLen := codecVersion, 0
	for _, e := range exts {
		if len(e.val) > 0 {
			version = codecVersionV2
			extLen += 2*binary.MaxVarintLen32 + len(e.val)
		}
	}
	n := 1 + 3*binary.MaxVarintLen64 + 6*binary.MaxVarintLen32 +
		len(ev.ID) + len(ev.Kind) + len(ev.Path) + len(ev.ClientIP) + len(ev.LastError) + len(ev.Body) + extLen
	b := make([]byte, 0, n)
	b = append(b, version)
	b = binary.AppendVarint(b, timeToNanos(ev.FirstSeen))
	b = binary.AppendVarint(b, timeToNanos(ev.NextTry))
	b = binary.AppendUvarint(b, uint64(max(ev.Attempts, 0)))
	for _, s := range [...]string{ev.ID, ev.Kind, ev.Path, ev.ClientIP, ev.LastError} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Body)))
	b = append(b, ev.Body...)
	for _, e := range exts {
		if len(e.val) > 0 {
			b = binary.AppendUvarint(b, e.tag)
			b = binary.AppendUvarint(b, uint64(len(e.val)))
			b = append(b, e.val...)
		}
	}
	return b
}

// encodeHeader serialises a header as name/value pairs in name order,
// each string a uvarint length and its bytes; nil for no header.
func encodeHeader(h http.Header) []byte {
	if h == nil {
		return nil
	}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	b := []byte{0} // a marker, so that an empty header is still stored
	for _, k := range names {
		for _, v := range h[k] {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeHeader parses encodeHeader's output.
func decodeHeader(b []byte) (http.Header, error) {
	if len(b) == 0 || b[0] != 0 {
		return nil, fmt.Errorf("%w: bad header field", errCorrupt)
	}
	d := decoder{b: b[1:]}
	h := http.Header{}
	for d.err == nil && len(d.b) > 0 {
		k, v := d.bytes(), d.bytes()
		if d.err == nil && len(k) == 0 {
			d.fail("empty header name")
		}
		if d.err == nil {
			h[string(k)] = append(h[string(k)], string(v))
		}
	}
	return h, d.err
}

// record is a parsed stored record whose byte fields alias the input.
type record struct {
	firstSeen, nextTry time.Time
	attempts           int
	id, kind, path     []byte
	clientIP, lastErr  []byte
	body               []byte
	traceParent        []byte // version 2 extensions
	traceState         []byte
	header             []byte
	belowPrefix        []byte
}

// parseRecord parses a record made by encodeEvent without copying.
func parseRecord(b []byte) (record, error) {
	d := decoder{b: b}
	version := d.byte()
	switch {
	case d.err != nil:
	case version > codecVersionV2:
		return record{}, &NewerError{Version: int(version)}
	case version != codecVersion && version != codecVersionV2:
		return record{}, fmt.Errorf("%w: unknown version %d", errCorrupt, version)
	}
	r := record{
		firstSeen: nanosToTime(d.varint()),
		nextTry:   nanosToTime(d.varint()),
	}
	attempts := d.uvarint()
	if attempts > math.MaxInt32 {
		d.fail("attempts out of range")
	}
	r.attempts = int(attempts)
	r.id = d.bytes()
	r.kind = d.bytes()
	r.path = d.bytes()
	r.clientIP = d.bytes()
	r.lastErr = d.bytes()
	r.body = d.bytes()
	if version == codecVersionV2 {
		if d.err == nil && len(d.b) == 0 {
			d.fail("version 2 record without extensions (truncated)")
		}
		r.parseExtensions(&d)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return record{}, d.err
	}
	return r, nil
}

// parseExtensions reads a version 2 record's extension fields up to the
// end, skipping unknown tags.
func (r *record) parseExtensions(d *decoder) {
	for d.err == nil && len(d.b) > 0 {
		tag := d.uvarint()
		val := d.bytes()
		switch tag {
		case extTraceParent:
			r.traceParent = val
		case extTraceState:
			r.traceState = val
		case extHeader:
			r.header = val
		case extBelowPrefix:
			r.belowPrefix = val
		}
	}
}

// event copies r into a new Event.
func (r record) event() (*Event, error) {
	ev := &Event{
		ID:          string(r.id),
		Kind:        string(r.kind),
		Path:        string(r.path),
		ClientIP:    string(r.clientIP),
		FirstSeen:   r.firstSeen,
		Attempts:    r.attempts,
		NextTry:     r.nextTry,
		LastError:   string(r.lastErr),
		TraceParent: string(r.traceParent),
		TraceState:  string(r.traceState),

		PathBelowPrefix: string(r.belowPrefix),
	}
	if r.body != nil {
		ev.Body = append([]byte(nil), r.body...)
	}
	if r.belowPrefix != nil && r.header == nil {
		// written before the header, and only with one: a record cut
		// between the two is not taken for a rendered event
		return nil, fmt.Errorf("%w: a path below the prefix without headers", errCorrupt)
	}
	if r.header != nil {
		h, err := decodeHeader(r.header)
		if err != nil {
			return nil, err
		}
		ev.Header = h
	}
	return ev, nil
}

// decodeEvent parses a record made by encodeEvent into a new Event. It
// copies everything it keeps, so b may be memory owned by a bbolt
// transaction.
func decodeEvent(b []byte) (*Event, error) {
	r, err := parseRecord(b)
	if err != nil {
		return nil, err
	}
	return r.event()
}

// decoder consumes a record front to back; the first failure sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errCorrupt, what)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed field, aliasing the input; nil when empty.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("field longer than record")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// timeToNanos maps the zero time to 0 and clamps times outside int64
// nanoseconds since the epoch.
func timeToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func nanosToTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
