package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
	"github.com/caddyhook/caddyhook/internal/version"
)

func TestViewVersionAgrees(t *testing.T) {
	if ViewVersion != version.ViewMessage {
		t.Errorf("the view writes version %d, internal/version says %d", ViewVersion, version.ViewMessage)
	}
}

// viewNow is the time of the view tests' messages.
var viewNow = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// sampleEvent is a valid event of a list (detail: with headers and body).
func sampleEvent(detail bool) eventlog.EventJSON {
	e := eventlog.EventJSON{Type: "event", Cursor: "42", ID: "0c4841af-52aa-4c7e-9b0a-1f7f0e1d2c3b", Time: viewNow.Add(-time.Second),
		Path: "/hooks", Hook: "github", Route: "github-pr", Client: "203.0.113.7", Auth: "token", Status: 200,
		LatencyMs: 1.25, State: eventlog.StateDead, Error: "expired after 3 attempts; last: gateway status 502: bad gateway",
		Node: "d1-host", Dispatch: []eventlog.Dispatch{{ID: "0c4841af-52aa-4c7e-9b0a-1f7f0e1d2c3b", Kind: "agent",
			State: eventlog.StateDead, GatewayStatus: 502, Attempts: 3, Error: "expired after 3 attempts", Node: "d1-host",
			Updated: viewNow}}, BodyBytes: 12}
	if detail {
		body := "{\"a\":\"<b>\"}\n"
		e.Body, e.BodyKept = &body, true
		e.Headers = []eventlog.Header{{Name: "Content-Type", Value: "application/json", Shown: true}, {Name: "Authorization"}}
	}
	return e
}

// validViews are one message of each kind, as another node sends them.
func validViews() map[string]ViewMessage {
	ev, detail := sampleEvent(false), sampleEvent(true)
	row := eventlog.RejectionJSON{Type: "rejections", Cursor: "7", Time: viewNow, Last: viewNow, Minute: viewNow.Truncate(time.Minute),
		Client: "198.51.100.4", Status: 401, Reason: "invalid or missing token", Hook: "wake", Count: 37, Node: "e1"}
	rates := eventlog.NoRates(viewNow)
	rates.Accepted[10] = 2.5
	facts := DeliveryFacts{Delivers: true, Connected: true, Ready: true, Workers: 4, Progress: viewNow, LastSuccess: viewNow,
		LastError: "gateway status 502: bad gateway", LastErrorAt: viewNow, Rate: 1.5, Delivered: 10, Failed: 2}
	req := func(op string) *ViewRequest {
		return &ViewRequest{ID: "0123456789abcdef", From: "e1-host", Time: viewNow, Op: op, Reply: "_INBOX.AbCdEf0123456789"}
	}
	list, detailReq, tail := req(ViewList), req(ViewDetail), req(ViewTail)
	list.Query = map[string]string{"hook": "github", "status": "4xx", "limit": "50"}
	detailReq.Event = ev.ID
	tail.Inbox, tail.Until = "_INBOX.Zz9876543210abcd", viewNow.Add(10*time.Second)
	ans := func() *ViewAnswer {
		return &ViewAnswer{ID: "0123456789abcdef", Node: "d1-host", Path: "/hooks", Time: viewNow}
	}
	page, det, rt, hl, failed := ans(), ans(), ans(), ans(), ans()
	page.Page = &ViewPage{Entries: []ViewEntry{{Event: &ev}, {Rows: &row}}, More: true}
	det.Event = &detail
	rt.Rates = &rates
	hl.Health = &facts
	failed.Error = "its event log is off (events off)"
	return map[string]ViewMessage{
		"list request": {Request: list}, "detail request": {Request: detailReq}, "tail request": {Request: tail},
		"rates request": {Request: req(ViewRates)},
		"page":          {Answer: page}, "detail": {Answer: det}, "rates": {Answer: rt}, "health": {Answer: hl}, "error": {Answer: failed},
		"tail batch": {Tail: &TailBatch{Inbox: "_INBOX.Zz9876543210abcd", Node: "e2", N: 3, Time: viewNow, Lost: true,
			Entries: []ViewEntry{{Event: &ev}, {Rows: &row}}}},
		"tail done": {Tail: &TailBatch{Inbox: "_INBOX.Zz9876543210abcd", Node: "e2", N: 4, Time: viewNow, Done: true}},
	}
}

// TestViewRoundTrip: every kind of message reads back as it was sent.
func TestViewRoundTrip(t *testing.T) {
	for name, m := range validViews() {
		msg, err := EncodeView(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeView(msg, viewNow, DefaultClockSkew)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, msg)
		}
		if !sameJSON(got, m) {
			a, _ := json.Marshal(viewWire{Request: got.Request, Answer: got.Answer, Tail: got.Tail})
			t.Errorf("%s: read back\n%s\nsent\n%s", name, a, msg)
		}
	}
}

// mutate re-encodes the JSON of a valid message after f changes it.
func mutate(t *testing.T, m ViewMessage, f func(w map[string]any)) []byte {
	t.Helper()
	msg, err := EncodeView(m)
	if err != nil {
		t.Fatal(err)
	}
	var w map[string]any
	if err := json.Unmarshal(msg, &w); err != nil {
		t.Fatal(err)
	}
	f(w)
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestViewRefuses: what another node (or anyone who got the keys wrong)
// may send that is not a message of the view is refused with a reason,
// never read in part.
func TestViewRefuses(t *testing.T) {
	v := validViews()
	sub := func(w map[string]any, path ...string) map[string]any {
		for _, p := range path {
			switch x := w[p].(type) {
			case map[string]any:
				w = x
			case []any:
				w = x[0].(map[string]any)
			}
		}
		return w
	}
	for _, tc := range []struct {
		name  string
		msg   []byte
		newer bool
	}{
		{"a newer version", mutate(t, v["page"], func(w map[string]any) { w["v"] = 2 }), true},
		{"no version", mutate(t, v["page"], func(w map[string]any) { delete(w, "v") }), false},
		{"two kinds", mutate(t, v["page"], func(w map[string]any) { w["tail"] = w["answer"] }), false},
		{"no kind", []byte(`{"v":1}`), false},
		{"an unknown field", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer")["extra"] = 1 }), false},
		{"an unknown field of an event", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["x"] = 1 }), false},
		{"trailing data", append(mutate(t, v["page"], func(map[string]any) {}), []byte(` {}`)...), false},
		{"a request id not hex", mutate(t, v["rates request"], func(w map[string]any) { sub(w, "request")["id"] = "0123456789abcdeg" }), false},
		{"a request from a bad node name", mutate(t, v["rates request"], func(w map[string]any) { sub(w, "request")["from"] = "a b" }), false},
		{"an unknown operation", mutate(t, v["rates request"], func(w map[string]any) { sub(w, "request")["op"] = "drop" }), false},
		{"a reply that is no inbox", mutate(t, v["rates request"], func(w map[string]any) { sub(w, "request")["reply"] = "hooks.x.view" }), false},
		{"a detail without an event", mutate(t, v["detail request"], func(w map[string]any) { delete(sub(w, "request"), "event") }), false},
		{"a tail without an inbox", mutate(t, v["tail request"], func(w map[string]any) { delete(sub(w, "request"), "inbox") }), false},
		{"a tail lease too far ahead", mutate(t, v["tail request"], func(w map[string]any) {
			sub(w, "request")["until"] = viewNow.Add(2 * MaxTailLease).Format(time.RFC3339Nano)
		}), false},
		{"an old request", mutate(t, v["rates request"], func(w map[string]any) {
			sub(w, "request")["time"] = viewNow.Add(-time.Hour).Format(time.RFC3339Nano)
		}), false},
		{"a query key not allowed", mutate(t, v["list request"], func(w map[string]any) { sub(w, "request", "query")["path"] = "/x" }), false},
		{"a control character in a hook", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["hook"] = "a\x1b[31m" }), false},
		{"a bidi control in a reason", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["reason"] = "ok\u202egnp.exe" }), false},
		{"a status out of range", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["status"] = 700 }), false},
		{"an unknown state", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["state"] = "owned" }), false},
		{"a body in a list entry", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["body"] = "x" }), false},
		{"a negative latency", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["latency_ms"] = -1 }), false},
		{"an answer node with markup", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer")["node"] = "<b>" }), false},
		{"an entry's node with markup", mutate(t, v["page"], func(w map[string]any) { sub(w, "answer", "page", "entries", "event")["node"] = "<img>" }), false},
		{"rates of another length", mutate(t, v["rates"], func(w map[string]any) { sub(w, "answer", "rates")["accepted"] = []float64{1} }), false},
		{"a tail batch numbered 0", mutate(t, v["tail batch"], func(w map[string]any) { sub(w, "tail")["n"] = 0 }), false},
		{"an empty entry", mutate(t, v["tail batch"], func(w map[string]any) { sub(w, "tail")["entries"] = []any{map[string]any{}} }), false},
		{"too large", []byte(`{"v":1,"answer":{"error":"` + strings.Repeat("x", MaxViewBytes) + `"}}`), false},
		{"not JSON", []byte("\x00\x01"), false},
	} {
		_, err := DecodeView(tc.msg, viewNow, DefaultClockSkew)
		switch {
		case err == nil:
			t.Errorf("%s: accepted: %s", tc.name, tc.msg[:min(len(tc.msg), 300)])
		case tc.newer != errors.Is(err, ErrNewerView):
			t.Errorf("%s: %v; newer version: %v", tc.name, err, tc.newer)
		}
	}
}

// TestViewClampsTimes: a time later than now plus the skew reads as now.
func TestViewClampsTimes(t *testing.T) {
	m := validViews()["page"]
	m.Answer.Time = viewNow.Add(time.Hour)
	msg, err := EncodeView(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeView(msg, viewNow, DefaultClockSkew)
	if err != nil || !got.Answer.Time.Equal(viewNow) {
		t.Errorf("a future answer time read as %v (%v), want now", got.Answer, err)
	}
}

// hostile returns a string of random runes, hostile ones among them.
func hostile(r *rand.Rand) string {
	pool := []string{"a", "Z", "9", "-", "_", ".", " ", "\n", "\x00", "\x1b[2J", "\u202e", "\u200b", "<script>", "é", "\xff",
		"\"", "\\", "/", "…", "😀", "\t", "\r"}
	var b strings.Builder
	for range r.IntN(40) {
		b.WriteString(pool[r.IntN(len(pool))])
	}
	if r.IntN(20) == 0 {
		b.WriteString(strings.Repeat("x", 300))
	}
	return b.String()
}

// randomView is a message of random content.
func randomView(r *rand.Rand) ViewMessage {
	s := func() string { return hostile(r) }
	at := viewNow.Add(-time.Duration(r.IntN(10)) * time.Second)
	ev := func(detail bool) *eventlog.EventJSON {
		e := eventlog.EventJSON{Type: []string{"event", "operator", s()}[r.IntN(3)], Cursor: s(), ID: []string{s(), "0c4841af-52aa"}[r.IntN(2)],
			Time: at, Path: s(), Hook: s(), Route: s(), Mapping: s(), Client: s(), Auth: s(), Status: r.IntN(800) - 50, Reason: s(),
			LatencyMs: r.Float64()*10 - 1, IdemKey: s(), ReplayOf: s(), State: []string{"queued", "dead", s()}[r.IntN(3)], RunID: s(),
			Error: s(), Node: s(), Action: s(), Operator: s(), Target: s(), BodyBytes: r.IntN(100) - 10, BodyNote: s(), ReplayNote: s()}
		for range r.IntN(3) {
			e.Dispatch = append(e.Dispatch, eventlog.Dispatch{ID: []string{s(), "id-1"}[r.IntN(2)], Kind: s(),
				State: []string{"retrying", s()}[r.IntN(2)], GatewayStatus: r.IntN(700), RunID: s(), Attempts: r.IntN(5) - 1, Error: s(), Node: s(), Updated: at})
		}
		if detail {
			b := s()
			e.Body = &b
			e.Headers = []eventlog.Header{{Name: s(), Value: s(), Shown: true}}
		}
		return &e
	}
	row := func() *eventlog.RejectionJSON {
		return &eventlog.RejectionJSON{Type: "rejections", Cursor: s(), Time: at, Last: at, Minute: at, Client: s(), Status: r.IntN(700),
			Reason: s(), Hook: s(), Count: uint64(r.IntN(9)), Node: s()}
	}
	entries := func() []ViewEntry {
		var es []ViewEntry
		for range r.IntN(4) {
			if r.IntN(2) == 0 {
				es = append(es, ViewEntry{Event: ev(false)})
			} else {
				es = append(es, ViewEntry{Rows: row()})
			}
		}
		return es
	}
	switch r.IntN(3) {
	case 0:
		q := &ViewRequest{ID: NewViewID(), From: s(), Time: at, Op: []string{ViewList, ViewTail, ViewDetail, s()}[r.IntN(4)],
			Query: map[string]string{"hook": s(), s(): s()}, Event: []string{s(), "id-1"}[r.IntN(2)], Inbox: "_INBOX.abcdefgh12", Until: at.Add(time.Second),
			Reply: "_INBOX.abcdefgh34"}
		return ViewMessage{Request: q}
	case 1:
		a := &ViewAnswer{ID: NewViewID(), Node: s(), Path: s(), Time: at, Error: s()}
		switch r.IntN(4) {
		case 0:
			a.Page = &ViewPage{Entries: entries(), More: r.IntN(2) == 0}
		case 1:
			a.Event = ev(true)
		case 2:
			rates := eventlog.NoRates(at)
			rates.Accepted[0] = r.Float64()*5 - 1
			a.Rates = &rates
		default:
			a.Health = &DeliveryFacts{InFlight: r.IntN(5) - 1, LastError: s(), Rate: r.Float64()*3 - 1}
		}
		return ViewMessage{Answer: a}
	}
	return ViewMessage{Tail: &TailBatch{Inbox: "_INBOX.abcdefgh56", Node: s(), N: uint64(1 + r.IntN(5)), Time: at, Entries: entries()}}
}

// withIDs sets what identifies a message (its node, operation, event
// id) to valid values.
func withIDs(m ViewMessage) {
	switch {
	case m.Request != nil:
		m.Request.From = "node-1"
		if m.Request.Op == "" {
			m.Request.Op = ViewRates
		}
		m.Request.Event = "id-1"
	case m.Answer != nil:
		m.Answer.Node = "node-1"
	case m.Tail != nil:
		m.Tail.Node = "node-1"
	}
}

// checkTexts fails for a text field of an accepted message that is not
// one printable line (a body may hold lines, but only valid UTF-8).
func checkTexts(t *testing.T, where string, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkTexts(t, where, v.Elem(), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				checkTexts(t, where, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkTexts(t, where, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			checkTexts(t, where, k, path+"{key}")
			checkTexts(t, where, v.MapIndex(k), path+"{value}")
		}
	case reflect.String:
		s := v.String()
		if strings.HasSuffix(path, ".Body") {
			if !utf8.ValidString(s) {
				t.Errorf("%s: %s is not valid UTF-8", where, path)
			}
			return
		}
		if safetext.Line(s) != s {
			t.Errorf("%s: %s = %q is not one printable line", where, path, s)
		}
		for _, r := range s {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Errorf("%s: %s holds %U", where, path, r)
			}
		}
	}
}

// TestViewNormalizeProperty: for random messages full of hostile text,
// NormalizeView is idempotent and leaves m alone, and its result is read
// back as it is (when it fits), with every text one printable line.
func TestViewNormalizeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 1))
	for i := range 2000 {
		m := randomView(r)
		before, _ := json.Marshal(viewWire{Request: m.Request, Answer: m.Answer, Tail: m.Tail})
		n := NormalizeView(m)
		after, _ := json.Marshal(viewWire{Request: m.Request, Answer: m.Answer, Tail: m.Tail})
		if string(before) != string(after) {
			t.Fatalf("message %d: NormalizeView changed its argument", i)
		}
		if !sameJSON(NormalizeView(n), n) {
			t.Fatalf("message %d: NormalizeView is not idempotent", i)
		}
		msg, err := EncodeView(m)
		if err != nil {
			continue // too large, or not one of the ops
		}
		got, err := DecodeView(msg, viewNow, DefaultClockSkew)
		if err != nil {
			// refused only for what identifies it, which Normalize cannot
			// make up: with those set, the rest reads back
			withIDs(n)
			if msg, err = EncodeView(n); err == nil {
				got, err = DecodeView(msg, viewNow, DefaultClockSkew)
			}
			if err != nil {
				t.Fatalf("message %d: refused for more than its identity: %v\n%s", i, err, msg)
			}
		}
		if !sameJSON(got, n) {
			t.Fatalf("message %d: read back other than normalized", i)
		}
		checkTexts(t, fmt.Sprintf("message %d", i), reflect.ValueOf(got), "m")
	}
}

// FuzzDecodeView: no input makes DecodeView panic; what it accepts is a
// fixed point of NormalizeView (it encodes and reads back the same), and
// every text of it is one printable line.
func FuzzDecodeView(f *testing.F) {
	for _, m := range validViews() {
		msg, err := EncodeView(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
	}
	f.Add([]byte(`{"v":1,"answer":{"id":"0123456789abcdef","node":"x","path":"/","time":"2026-03-01T12:00:00Z","page":{"entries":[{"event":{"type":"event","hook":"\u001b"}}]}}}`))
	f.Add([]byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := DecodeView(msg, viewNow, DefaultClockSkew)
		if err != nil {
			return
		}
		if countSet(m) != 1 {
			t.Fatalf("accepted %d kinds", countSet(m))
		}
		again, err := EncodeView(m)
		if err != nil {
			t.Fatalf("an accepted message does not encode: %v", err)
		}
		m2, err := DecodeView(again, viewNow, DefaultClockSkew)
		if err != nil || !sameJSON(m, m2) {
			t.Fatalf("an accepted message does not read back: %v", err)
		}
		checkTexts(t, "accepted", reflect.ValueOf(m), "m")
	})
}

// TestMergePage: the nodes' pages, merged newest first; no entry older
// than the last one a node with more sent, so the next page (before the
// last time) loses none.
func TestMergePage(t *testing.T) {
	at := func(s int) ViewEntry {
		e := eventlog.EventJSON{ID: fmt.Sprint(s), Time: viewNow.Add(time.Duration(s) * time.Second)}
		return ViewEntry{Event: &e}
	}
	ids := func(es []ViewEntry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.Event.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name  string
		pages [][]ViewEntry
		more  []bool
		limit int
		want  string
		next  bool
	}{
		{"interleaved", [][]ViewEntry{{at(9), at(5), at(1)}, {at(8), at(4)}}, []bool{false, false}, 10, "9,8,5,4,1", false},
		{"cut at the limit", [][]ViewEntry{{at(9), at(5), at(1)}, {at(8), at(4)}}, []bool{false, false}, 3, "9,8,5", true},
		{"a node with more", [][]ViewEntry{{at(9), at(7)}, {at(8), at(4), at(2)}}, []bool{true, false}, 10, "9,8,7", true},
		{"ties at the limit kept", [][]ViewEntry{{at(9), at(5)}, {at(5), at(1)}}, []bool{false, false}, 2, "9,5,5", true},
		{"nothing", [][]ViewEntry{{}, {}}, []bool{false, false}, 10, "", false},
	} {
		got, next := MergePage(tc.pages, tc.more, tc.limit)
		if ids(got) != tc.want || next != tc.next {
			t.Errorf("%s: %s (next %v), want %s (next %v)", tc.name, ids(got), next, tc.want, tc.next)
		}
	}
}

// TestMergeRates: counts add up step by step (aligned on their start),
// the mean time weighted by the accepted requests, the maximum the
// largest.
func TestMergeRates(t *testing.T) {
	a, b := eventlog.NoRates(viewNow), eventlog.NoRates(viewNow.Add(eventlog.SeriesStep)) // b is one step later
	last := eventlog.SeriesLen - 1
	a.Accepted[last], a.LatencyAvgMs[last], a.LatencyMaxMs[last] = 1, 10, 20
	b.Accepted[last-1], b.LatencyAvgMs[last-1], b.LatencyMaxMs[last-1] = 3, 2, 5 // the same step as a's last
	b.Rejected[last] = 4
	m := MergeRates([]eventlog.RatesJSON{a, b})
	if !m.Start.Equal(b.Start) {
		t.Fatalf("start %v, want the newest %v", m.Start, b.Start)
	}
	i := last - 1 // a's last step in the merged series
	if m.Accepted[i] != 4 || m.LatencyAvgMs[i] != (10*1+2*3)/4.0 || m.LatencyMaxMs[i] != 20 || m.Rejected[last] != 4 {
		t.Errorf("merged step: accepted %v, mean %v, max %v, rejected next %v", m.Accepted[i], m.LatencyAvgMs[i], m.LatencyMaxMs[i], m.Rejected[last])
	}
}
