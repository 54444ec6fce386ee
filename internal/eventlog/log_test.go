package eventlog

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// addr4 is the i-th address of 10.0.0.0/8 and its lockout key.
func addr4(i int) (netip.Addr, [16]byte) {
	ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return ip, ip.As16()
}

// accepted makes an accepted event with id and a body of n bytes.
func accepted(id string, at time.Time, n int) *Event {
	ip, _ := addr4(1)
	return &Event{ID: id, Time: at, Path: "/hooks", Hook: "wake", Route: "wake", Client: ip, Auth: "token", Status: 200,
		Headers:  []Header{{Name: "Content-Type", Value: "application/json", Shown: true}, {Name: "Authorization"}},
		Body:     make([]byte, n),
		Dispatch: []Dispatch{{ID: id, Kind: "wake", State: StateSent, GatewayStatus: 200, Attempts: 1}}, Tracked: true}
}

// refusal is a wrong-token refusal from the i-th address.
func refusal(i int, at time.Time) Refusal {
	ip, key := addr4(i)
	return Refusal{Time: at, Client: ip, Key: key, Status: 401, Reason: "invalid or missing token", Hook: "wake"}
}

// events lists every entry of kind typ ("event" or "rejections").
func entries(l *Log, f Filter) []any {
	f.Limit = MaxLimit
	var out []any
	for {
		p := l.List(f)
		out = append(out, p.Entries...)
		if p.Next == "" {
			return out
		}
		f.Before = mustCursor(p.Next)
	}
}

func mustCursor(s string) uint64 {
	var n uint64
	fmt.Sscan(s, &n)
	return n
}

// TestFloodNeverEvictsAccepted is the flood test: 100,000
// wrong-token requests from many addresses, then 100 accepted events:
// all 100 are listed, and the rejections are aggregated rows, within the
// rows bound, whose counts add up to the flood.
func TestFloodNeverEvictsAccepted(t *testing.T) {
	l, err := New(Bounds{MaxEvents: 100, MaxRejections: 1000}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 100_000 {
		l.Reject(refusal(i%5000, now.Add(time.Duration(i)*time.Microsecond)))
	}
	for i := range 100 {
		l.Accept(accepted(fmt.Sprintf("ev-%03d", i), now.Add(time.Second), 0))
	}
	evs := entries(l, Filter{Status: "accepted"})
	if len(evs) != 100 {
		t.Fatalf("%d accepted events listed, want 100", len(evs))
	}
	for i, e := range evs { // newest first
		if id := e.(EventJSON).ID; id != fmt.Sprintf("ev-%03d", 99-i) {
			t.Fatalf("entry %d is %s", i, id)
		}
	}
	rows := entries(l, Filter{Status: "rejected"})
	if len(rows) == 0 || len(rows) > 1000+1 {
		t.Fatalf("%d rejection rows, want 1 to 1001", len(rows))
	}
	var total uint64
	other := false
	for _, r := range rows {
		rj := r.(RejectionJSON)
		total += rj.Count
		other = other || rj.Client == overflowClient
		if rj.Status != 401 || rj.Reason != "invalid or missing token" {
			t.Fatalf("row %+v", rj)
		}
	}
	if total != 100_000 {
		t.Fatalf("the rows count %d rejections, want 100000", total)
	}
	if !other {
		t.Fatal("no overflow row although 5000 addresses exceed 1000 rows")
	}
}

// TestRejectionRowsPerAddressAndMinute: one row per address, status,
// reason and minute.
func TestRejectionRowsPerAddressAndMinute(t *testing.T) {
	l, _ := New(Bounds{}, Options{})
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range 30 {
		l.Reject(refusal(1, base.Add(time.Duration(i)*time.Second)))
	}
	l.Reject(refusal(1, base.Add(61*time.Second)))
	l.Reject(refusal(2, base.Add(2*time.Second)))
	r := refusal(1, base.Add(3*time.Second))
	r.Status, r.Reason, r.Locked = 429, "locked out", true
	l.Reject(r)
	rows := entries(l, Filter{Status: "rejected", Since: base.Add(-time.Hour)})
	got := map[string]uint64{}
	for _, e := range rows {
		rj := e.(RejectionJSON)
		got[fmt.Sprintf("%s %d %s", rj.Client, rj.Status, rj.Minute.Format("15:04"))] += rj.Count
	}
	want := map[string]uint64{"10.0.0.1 401 12:00": 30, "10.0.0.1 401 12:01": 1, "10.0.0.2 401 12:00": 1, "10.0.0.1 429 12:00": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

// TestBoundsCountBytesAge: the oldest events go first, by count, bytes
// and age.
func TestBoundsCountBytesAge(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		b     Bounds
		n     int
		body  int
		age   time.Duration // of the first half
		wantN int
	}{
		{"count", Bounds{MaxEvents: 10}, 25, 0, 0, 10},
		{"bytes", Bounds{MaxBytes: 64 << 10}, 100, 4 << 10, 0, 64 << 10 / (4<<10 + eventOverhead + 160)},
		{"age", Bounds{Retain: time.Hour}, 20, 0, 2 * time.Hour, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, _ := New(c.b, Options{})
			for i := range c.n {
				at := now
				if i < c.n/2 {
					at = now.Add(-c.age)
				}
				l.Accept(accepted(fmt.Sprint(i), at, c.body))
			}
			p := l.List(Filter{Limit: MaxLimit})
			if len(p.Entries) != c.wantN || p.Events != c.wantN {
				t.Fatalf("%d events kept (%d listed), want %d", p.Events, len(p.Entries), c.wantN)
			}
			if p.Bytes > l.Bounds().MaxBytes {
				t.Fatalf("%d bytes held over the bound %d", p.Bytes, l.Bounds().MaxBytes)
			}
			if first := p.Entries[0].(EventJSON).ID; first != fmt.Sprint(c.n-1) {
				t.Fatalf("newest is %s, want %d", first, c.n-1)
			}
			if _, _, ok := l.Get(fmt.Sprint(c.n - c.wantN - 1)); ok {
				t.Fatal("an evicted event is still found by id")
			}
			untracked := accepted("untracked", now, 0)
			untracked.Tracked = false
			untracked.Dispatch = append(untracked.Dispatch, Dispatch{ID: "second-action"})
			l.Accept(untracked)
			if ev, _, ok := l.Get("second-action"); !ok || ev.ID != "untracked" {
				t.Fatal("an untracked event is not found by its second action's id")
			}
		})
	}
}

// TestUpdateBeforeAccept: a spooled event delivered before its request's
// answer is recorded still shows as delivered.
func TestUpdateBeforeAccept(t *testing.T) {
	l, _ := New(Bounds{}, Options{})
	if l.Update("a1", func(d *Dispatch) bool { d.State = StateDelivered; return true }) {
		t.Fatal("Update found an action that is not in the log")
	}
	e := accepted("a1", time.Now(), 0)
	e.Dispatch[0].State = StateQueued
	l.Accept(e)
	ev, _, _ := l.Get("a1")
	if ev.State != StateDelivered {
		t.Fatalf("state %q, want delivered", ev.State)
	}
	l.Update("a1", func(d *Dispatch) bool { d.State = StateDead; d.Error = "gateway status 400"; return true })
	if ev, _, _ := l.Get("a1"); ev.State != StateDead || ev.Dispatch[0].Error == "" {
		t.Fatalf("after the update: %+v", ev.Dispatch)
	}
}

// TestRegistrationsOldestBoundsApply: a config that never runs (a refused
// reload) changes nothing; the next one's bounds apply when the running
// one goes.
func TestRegistrationsOldestBoundsApply(t *testing.T) {
	l, _ := New(Bounds{MaxEvents: 50}, Options{})
	running := l.Register(Bounds{MaxEvents: 50})
	for i := range 40 {
		l.Accept(accepted(fmt.Sprint(i), time.Now(), 0))
	}
	refused := l.Register(Bounds{MaxEvents: 5})
	if n := l.List(Filter{}).Events; n != 40 {
		t.Fatalf("a second registration trimmed the log to %d", n)
	}
	refused.Release()
	next := l.Register(Bounds{MaxEvents: 10})
	if n := l.List(Filter{}).Events; n != 40 {
		t.Fatalf("a newer registration trimmed the log to %d", n)
	}
	running.Release()
	if n := l.List(Filter{}).Events; n != 10 {
		t.Fatalf("after the running config went: %d events, want 10", n)
	}
	next.Release()
}

// TestSubscriptionFollowsChanges: a live tail gets each new or changed
// event once, the filtered ones only, and the rows counted.
func TestSubscriptionFollowsChanges(t *testing.T) {
	l, _ := New(Bounds{}, Options{})
	l.Accept(accepted("before", time.Now(), 0))
	s := l.Subscribe()
	defer s.Close()
	l.Accept(accepted("e1", time.Now(), 0))
	other := accepted("e2", time.Now(), 0)
	other.Hook = "agent"
	l.Accept(other)
	l.Update("e1", func(d *Dispatch) bool { d.RunID = "run-1"; return true })
	l.Reject(refusal(3, time.Now()))
	if !s.Wait(context.Background(), time.Minute) {
		t.Fatal("Wait ended")
	}
	c := s.Next(Filter{Hook: "wake"}, true)
	if len(c.Events) != 1 || c.Events[0].ID != "e1" || c.Events[0].RunID != "run-1" {
		t.Fatalf("events %+v, want e1 once with its run id", c.Events)
	}
	if len(c.Rows) != 1 || c.Rows[0].Count != 1 || c.Lost {
		t.Fatalf("rows %+v lost %v", c.Rows, c.Lost)
	}
	if c := s.Next(Filter{}, true); len(c.Events)+len(c.Rows) != 0 {
		t.Fatalf("changes again: %+v", c)
	}
	for i := range journalSize + 10 {
		l.Accept(accepted(fmt.Sprint("x", i), time.Now(), 0))
	}
	if c := s.Next(Filter{}, false); !c.Lost || len(c.Events) != journalSize {
		t.Fatalf("after falling behind: lost %v, %d events", c.Lost, len(c.Events))
	}
}

// TestDirSurvivesRestart: with a directory, the events (bodies, outcome,
// replay data) come back after the log is closed and opened again.
func TestDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	l, err := New(Bounds{MaxEvents: 5}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		e := accepted(fmt.Sprint("d", i), time.Now(), 3)
		e.Replay = []byte(`[{"kind":"wake"}]`)
		l.Accept(e)
	}
	l.Update("d7", func(d *Dispatch) bool { d.State = StateDelivered; return true })
	l.Reject(refusal(1, time.Now()))
	if err := l.Destruct(); err != nil {
		t.Fatal(err)
	}
	l2, err := New(Bounds{MaxEvents: 5}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Destruct()
	p := l2.List(Filter{})
	if p.Events != 5 || p.Entries[0].(EventJSON).ID != "d7" || p.Entries[4].(EventJSON).ID != "d3" {
		t.Fatalf("after the restart: %d events, %+v", p.Events, p.Entries)
	}
	ev, replay, _ := l2.Get("d7")
	if ev.State != StateDelivered || ev.Body == nil || len(*ev.Body) != 3 || string(replay) != `[{"kind":"wake"}]` {
		t.Fatalf("d7 after the restart: %+v %s", ev, replay)
	}
	l2.Accept(accepted("new", time.Now(), 0))
	if ev, _, _ := l2.Get("new"); mustCursor(ev.Cursor) <= mustCursor(p.Entries[0].(EventJSON).Cursor) {
		t.Fatal("a new event's cursor is not after the loaded ones")
	}
	if _, err := New(Bounds{}, Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second log on the same directory: %v", err)
	}
}

// TestParseFilter covers the query parameters and their errors.
func TestParseFilter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		q       string
		wantErr string
		check   func(f Filter) bool
	}{
		{"", "", func(f Filter) bool { return f.Limit == DefaultLimit }},
		{"status=4xx&hook=/github/", "", func(f Filter) bool { return f.class == 4 && f.Hook == "github" }},
		{"status=401", "", func(f Filter) bool { return f.code == 401 }},
		{"status=ACCEPTED", "", func(f Filter) bool { return f.Status == "accepted" }},
		{"status=6xx", "status:", nil},
		{"status=abc", "status:", nil},
		{"since=10m", "", func(f Filter) bool { return f.Since.Equal(now.Add(-10 * time.Minute)) }},
		{"since=2026-01-01T11:00:00Z", "", func(f Filter) bool { return f.Since.Hour() == 11 }},
		{"since=yesterday", "since:", nil},
		{"before=42", "", func(f Filter) bool { return f.Before == 42 }},
		{"before=2026-01-01T11:00:00Z", "", func(f Filter) bool { return f.Until.Hour() == 11 }},
		{"before=x", "before:", nil},
		{"limit=0", "limit:", nil},
		{"limit=1001", "limit:", nil},
		{"limit=7&reason=Token", "", func(f Filter) bool { return f.Limit == 7 && f.Reason == "token" }},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.q)
		f, err := ParseFilter(q, now)
		switch {
		case c.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want %q…", c.q, err, c.wantErr)
		case c.wantErr == "" && (err != nil || !c.check(f)):
			t.Errorf("%q: %+v, %v", c.q, f, err)
		}
	}
}

// TestListFiltersAndPages: filters apply to events and rows alike, and
// the pages follow each other without gaps.
func TestListFiltersAndPages(t *testing.T) {
	l, _ := New(Bounds{}, Options{})
	now := time.Now()
	for i := range 30 {
		e := accepted(fmt.Sprint(i), now, 0)
		if i%3 == 0 {
			e.Hook, e.Status, e.Reason = "agent", 502, "gateway unreachable"
		}
		l.Accept(e)
		l.Reject(refusal(i, now))
	}
	count := func(q string) int {
		v, _ := url.ParseQuery(q)
		f, err := ParseFilter(v, now)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries(l, f))
	}
	for q, want := range map[string]int{"": 60, "status=accepted": 30, "status=rejected": 30, "status=5xx": 10,
		"hook=agent": 10, "reason=UNREACH": 10, "status=401": 30, "status=2xx&hook=wake": 20} {
		if got := count(q); got != want {
			t.Errorf("%q: %d entries, want %d", q, got, want)
		}
	}
	seen := map[string]bool{}
	f := Filter{Limit: 7}
	for {
		p := l.List(f)
		for _, e := range p.Entries {
			var c string
			switch v := e.(type) {
			case EventJSON:
				c = v.Cursor
			case RejectionJSON:
				c = v.Cursor
			}
			if seen[c] {
				t.Fatalf("cursor %s twice", c)
			}
			seen[c] = true
		}
		if p.Next == "" {
			break
		}
		f.Before = mustCursor(p.Next)
	}
	if len(seen) != 60 {
		t.Fatalf("paging saw %d entries, want 60", len(seen))
	}
}

// TestSeriesCounts: the rates count each kind in its step.
func TestSeriesCounts(t *testing.T) {
	var s series
	now := time.Now().Truncate(SeriesStep)
	for range 20 {
		s.observe(now, seriesAccepted, 3*time.Millisecond)
	}
	s.observe(now, seriesAccepted, 9*time.Millisecond)
	s.observe(now, seriesRejected, 0)
	s.observe(now, seriesLocked, 0)
	s.observe(now.Add(-SeriesStep), seriesRejected, 0)
	r := s.snapshot(now)
	last := len(r.Accepted) - 1
	if r.Accepted[last] != 21/SeriesStep.Seconds() || r.Rejected[last] != 1/SeriesStep.Seconds() ||
		r.Locked[last] != 1/SeriesStep.Seconds() || r.Rejected[last-1] != 1/SeriesStep.Seconds() {
		t.Fatalf("rates %v %v %v", r.Accepted[last], r.Rejected[last-1:], r.Locked[last])
	}
	if r.LatencyMaxMs[last] != 9 || r.LatencyAvgMs[last] < 3.2 || r.LatencyAvgMs[last] > 3.3 {
		t.Fatalf("latency avg %v max %v", r.LatencyAvgMs[last], r.LatencyMaxMs[last])
	}
	// an hour later the old steps are gone
	if r := s.snapshot(now.Add(2 * time.Hour)); r.Accepted[len(r.Accepted)-1] != 0 {
		t.Fatal("a step from two hours ago shows")
	}
}

// TestMemoryWithinBound: 1,000,000 mixed requests (accepted with 1 KiB
// bodies, and refusals from a million addresses) leave the heap within
// the configured bound plus the rejection rows' share.
func TestMemoryWithinBound(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 records")
	}
	b := Bounds{MaxEvents: 100_000, MaxBytes: 8 << 20, MaxRejections: 10_000}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	l, _ := New(b, Options{})
	now := time.Now()
	for i := range 1_000_000 {
		at := now.Add(time.Duration(i) * time.Microsecond)
		if i%2 == 0 {
			l.Accept(accepted(fmt.Sprint(i), at, 1<<10))
		} else {
			l.Reject(refusal(i, at))
		}
	}
	grew := int64(heap()) - int64(before)
	const rowBytes = 400 // a row, its map entry and its slot
	limit := b.MaxBytes + int64(b.MaxRejections)*rowBytes + 1<<20
	t.Logf("heap grew %.1f MiB (bound %.1f MiB: max_bytes %d MiB + %d rows)", float64(grew)/(1<<20), float64(limit)/(1<<20), b.MaxBytes>>20, b.MaxRejections)
	if grew > limit {
		t.Fatalf("heap grew %d bytes, over %d", grew, limit)
	}
	runtime.KeepAlive(l)
}

// FuzzParseFilter: any query is parsed or refused with an error, never a
// panic, and a parsed filter lists without one.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "status=4xx&hook=x", "since=10m&before=3&limit=5", "status=%ff", "before=2026-01-01T00:00:00Z", "reason=\x00"} {
		f.Add(s)
	}
	l, _ := New(Bounds{}, Options{})
	l.Accept(accepted("a", time.Now(), 1))
	l.Reject(refusal(1, time.Now()))
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		flt, err := ParseFilter(q, time.Now())
		if err != nil {
			return
		}
		if p := l.List(flt); len(p.Entries) > flt.Limit {
			t.Fatalf("%d entries over the limit %d", len(p.Entries), flt.Limit)
		}
	})
}

// TestEvictedEventsAreReleased: the journal of the live tails holds no
// evicted event, so the bounds hold for the memory too (with bodies on,
// 4,096 evicted events of 64 KiB would be 256 MiB).
func TestEvictedEventsAreReleased(t *testing.T) {
	l, _ := New(Bounds{MaxEvents: 10}, Options{})
	for i := range 100 {
		l.Accept(accepted(fmt.Sprint(i), time.Now(), 0))
		l.Update(fmt.Sprint(i), func(d *Dispatch) bool { d.State = StateDelivered; return true })
	}
	held := 0
	for _, e := range l.journal {
		if e != nil {
			held++
			if e.evicted {
				t.Fatalf("the journal holds the evicted event %s", e.ID)
			}
		}
	}
	if held != 10 {
		t.Fatalf("the journal holds %d events, want the 10 kept", held)
	}
}

// TestNextAtMost: a bounded tail gets the newest changes, in order, and
// the count of those left out; rows share the bound.
func TestNextAtMost(t *testing.T) {
	l, err := New(Bounds{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sub := l.Subscribe()
	defer sub.Close()
	now := time.Now()
	for i := range 10 {
		l.Accept(accepted(fmt.Sprintf("e%d", i), now, 1))
	}
	for i := range 3 {
		l.Reject(refusal(i+2, now))
	}
	c := sub.NextAtMost(Filter{}, true, 4)
	var ids []string
	for _, e := range c.Events {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "e6,e7,e8,e9" || len(c.Rows) != 0 || c.Skipped != 6+3 {
		t.Errorf("bounded to 4: events %v, %d rows, %d skipped; want e6..e9, no row, 9 skipped", ids, len(c.Rows), c.Skipped)
	}
	if c = sub.NextAtMost(Filter{}, true, 4); len(c.Events) != 0 || c.Skipped != 0 {
		t.Errorf("nothing changed since: %+v", c)
	}
	l.Accept(accepted("e10", now, 1))
	if c = sub.NextAtMost(Filter{}, true, -1); len(c.Events) != 1 || c.Skipped != 0 {
		t.Errorf("unbounded: %+v", c)
	}
}
