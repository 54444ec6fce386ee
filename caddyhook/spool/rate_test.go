package spool

import (
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		wantErr bool
	}{
		{"5/s", Rate{5, time.Second}, false},
		{"5/1s", Rate{5, time.Second}, false},
		{" 100/1m ", Rate{100, time.Minute}, false},
		{"10/500ms", Rate{10, 500 * time.Millisecond}, false},
		{"1/h", Rate{1, time.Hour}, false},
		{"5", Rate{}, true},
		{"x/s", Rate{}, true},
		{"0/s", Rate{}, true},
		{"-1/s", Rate{}, true},
		{"5/0s", Rate{}, true},
		{"5/1us", Rate{}, true},
		{"5/48h", Rate{}, true},
		{"100001/s", Rate{}, true},
		{"5/fortnight", Rate{}, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want && !tt.wantErr {
			t.Errorf("ParseRate(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if s := (Rate{5, time.Second}).String(); s != "5/1s" {
		t.Errorf("String() = %q", s)
	}
}

// TestSendLogWindow drives the limiter with explicit times: at most Count
// starts in any window of Interval, and a reload keeping the rate keeps
// the window.
func TestSendLogWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var l sendLog
	l.setRate(Rate{3, time.Second})
	for _, ms := range []int{0, 10, 20} {
		if w := l.wait(at(ms)); w != 0 {
			t.Fatalf("send %d ms: wait %v, want 0", ms, w)
		}
		l.record(at(ms))
	}
	if w := l.wait(at(30)); w != 970*time.Millisecond {
		t.Fatalf("4th send: wait %v, want 970ms", w)
	}
	if w := l.wait(at(1000)); w != 0 {
		t.Fatalf("after the window: wait %v", w)
	}
	l.record(at(1000))
	if w := l.wait(at(1005)); w != 5*time.Millisecond {
		t.Fatalf("ring: wait %v, want 5ms (the send at 10 ms leaves the window at 1010 ms)", w)
	}

	l.setRate(Rate{3, time.Second}) // same rate: nothing changes
	if w := l.wait(at(1005)); w != 5*time.Millisecond {
		t.Fatalf("same rate reset the window: wait %v", w)
	}
	l.setRate(Rate{2, time.Second}) // fewer: keeps the two most recent (20, 1000)
	if w := l.wait(at(1005)); w != 15*time.Millisecond {
		t.Fatalf("narrowed: wait %v, want 15ms", w)
	}
	l.setRate(Rate{})
	if w := l.wait(at(1005)); w != 0 {
		t.Fatalf("unlimited: wait %v", w)
	}
	l.record(at(1005)) // no-op
	if len(l.times) != 0 {
		t.Fatalf("unlimited log keeps %d times", len(l.times))
	}
}

// TestRateHoldsDeliveries: with 2 per hour, two of five events go out and
// the rest wait in the queue (depth shows them) until the rate is lifted.
func TestRateHoldsDeliveries(t *testing.T) {
	s := openTest(t, testConfig(t))
	snd := &fakeSender{}
	s.SetRate(Rate{2, time.Hour})
	s.SetSender(snd)
	for i := range 5 {
		mustAppend(t, s, newEvent(KindAgent, string(rune('a'+i))))
	}
	testkit.WaitFor(t, "two deliveries", func() bool { return s.Stats().Delivered >= 2 })
	s.mu.Lock()
	wait := s.sends.wait(time.Now())
	s.mu.Unlock()
	if st := s.Stats(); st.Delivered != 2 || st.Depth != 3 || wait <= 0 || st.Rate != (Rate{2, time.Hour}) {
		t.Fatalf("stats %+v, limiter wait %v: want 2 delivered, 3 queued, the limit in force", st, wait)
	}
	if st := s.Stats(); st.OldestAge <= 0 {
		t.Fatalf("oldest age %v while events wait", st.OldestAge)
	}
	// A reload with no rate lifts the limit.
	s.SetRate(Rate{})
	testkit.WaitFor(t, "drain", func() bool { return s.Stats().Depth == 0 })
	if got := snd.delivered(""); !testkit.SameSet(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("delivered %v", got)
	}
}
