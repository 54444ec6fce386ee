package spool

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/duration"
)

// Bounds of a Rate.
const (
	MaxRateCount    = 100_000
	MinRateInterval = time.Millisecond
	MaxRateInterval = 24 * time.Hour
)

// Rate caps deliveries: at most Count send attempts to the gateway start in
// any window of length Interval. The zero Rate is unlimited.
type Rate struct {
	Count    int
	Interval time.Duration
}

// ParseRate parses "<n>/<interval>", e.g. "5/s", "5/1s", "100/1m" or
// "10/500ms" (a bare unit means one of it).
func ParseRate(s string) (Rate, error) {
	n, iv, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want <n>/<interval>, e.g. 5/s or 100/1m", s)
	}
	count, err := strconv.Atoi(n)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: %q is not a whole number", s, n)
	}
	if iv != "" && (iv[0] < '0' || iv[0] > '9') {
		iv = "1" + iv
	}
	d, err := duration.Parse(iv)
	if err != nil {
		return Rate{}, fmt.Errorf("rate %q: the interval %v", s, err)
	}
	r := Rate{Count: count, Interval: d}
	return r, r.Validate()
}

// Validate reports a Rate outside its bounds; the zero Rate is valid.
func (r Rate) Validate() error {
	if r.Unlimited() {
		return nil
	}
	switch {
	case r.Count < 1 || r.Count > MaxRateCount:
		return fmt.Errorf("rate: count %d must be between 1 and %d", r.Count, MaxRateCount)
	case r.Interval < MinRateInterval || r.Interval > MaxRateInterval:
		return fmt.Errorf("rate: interval %s must be between %s and %s", r.Interval, MinRateInterval, MaxRateInterval)
	}
	return nil
}

// Unlimited reports the zero Rate.
func (r Rate) Unlimited() bool { return r.Count == 0 && r.Interval == 0 }

// String formats r as ParseRate reads it ("" when unlimited).
func (r Rate) String() string {
	if r.Unlimited() {
		return ""
	}
	return strconv.Itoa(r.Count) + "/" + r.Interval.String()
}

// sendLog is a sliding-window limiter: the start times of the last
// rate.Count sends, in a ring. A send may start when fewer than Count
// started within the last Interval. Called with the store's mutex held.
type sendLog struct {
	rate  Rate
	times []time.Time // ring of send start times, oldest at next once full
	next  int
}

// setRate changes the limit, keeping the most recent send times so that a
// config reload with the same rate does not open a fresh window.
func (l *sendLog) setRate(r Rate) {
	if r == l.rate {
		return
	}
	recent := l.ordered()
	l.rate, l.times, l.next = r, nil, 0
	if r.Unlimited() {
		return
	}
	if len(recent) > r.Count {
		recent = recent[len(recent)-r.Count:]
	}
	l.times = append(make([]time.Time, 0, r.Count), recent...)
}

// ordered returns the logged times, oldest first.
func (l *sendLog) ordered() []time.Time {
	if len(l.times) < l.rate.Count || l.next == 0 {
		return append([]time.Time(nil), l.times...)
	}
	return append(append([]time.Time(nil), l.times[l.next:]...), l.times[:l.next]...)
}

// wait returns how long until a send may start (0: now).
func (l *sendLog) wait(now time.Time) time.Duration {
	if l.rate.Unlimited() || len(l.times) < l.rate.Count {
		return 0
	}
	return max(0, l.times[l.next].Add(l.rate.Interval).Sub(now))
}

// record logs a send starting at now.
func (l *sendLog) record(now time.Time) {
	if l.rate.Unlimited() {
		return
	}
	if len(l.times) < l.rate.Count {
		l.times = append(l.times, now)
		return
	}
	l.times[l.next] = now
	l.next = (l.next + 1) % len(l.times)
}
