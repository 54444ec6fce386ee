package eventlog

import (
	"sync/atomic"
	"time"
)

// The rates cover the last hour in 10-second steps.
const (
	SeriesStep = 10 * time.Second
	SeriesLen  = 360 // steps of the rates: an hour
)

// Kinds of requests the rates count.
const (
	seriesAccepted = iota
	seriesRejected
	seriesLocked
)

// bucket counts one step. Its stamp is the step's number (unix time /
// SeriesStep); a bucket whose stamp is not the current step is reset by
// the first request of a new step. The counts are approximate under
// concurrency at a step boundary (a count may land just before the reset).
type bucket struct {
	stamp    atomic.Int64
	counts   [3]atomic.Uint64
	latSumUs atomic.Uint64
	latMaxUs atomic.Uint64
}

// series is a ring of buckets, lock-free: a request costs a few atomic
// operations.
type series struct {
	b [SeriesLen]bucket
}

// observe counts one request of kind at now, with its latency for an
// accepted one.
func (s *series) observe(now time.Time, kind int, latency time.Duration) {
	step := now.UnixNano() / int64(SeriesStep)
	b := &s.b[step%SeriesLen]
	if st := b.stamp.Load(); st != step {
		if st > step || !b.stamp.CompareAndSwap(st, step) {
			if b.stamp.Load() != step {
				return // a clock that went back, or a bucket reused meanwhile
			}
		} else {
			for i := range b.counts {
				b.counts[i].Store(0)
			}
			b.latSumUs.Store(0)
			b.latMaxUs.Store(0)
		}
	}
	b.counts[kind].Add(1)
	if kind == seriesAccepted {
		us := uint64(max(latency.Microseconds(), 0))
		b.latSumUs.Add(us)
		for {
			m := b.latMaxUs.Load()
			if us <= m || b.latMaxUs.CompareAndSwap(m, us) {
				break
			}
		}
	}
}

// RatesJSON is the last hour of a log's rates: per step, the requests
// accepted, rejected and refused as locked out (per second), and the
// accepted ones' mean and maximum time at the edge.
type RatesJSON struct {
	StepSeconds  int       `json:"step_seconds"`
	Start        time.Time `json:"start"`
	Accepted     []float64 `json:"accepted"`
	Rejected     []float64 `json:"rejected"`
	Locked       []float64 `json:"locked"`
	LatencyAvgMs []float64 `json:"latency_avg_ms"`
	LatencyMaxMs []float64 `json:"latency_max_ms"`
}

// snapshot returns the rates of the hour up to now, oldest step first.
func (s *series) snapshot(now time.Time) RatesJSON {
	cur := now.UnixNano() / int64(SeriesStep)
	first := cur - SeriesLen + 1
	out := RatesJSON{StepSeconds: int(SeriesStep / time.Second), Start: time.Unix(0, first*int64(SeriesStep)).UTC(),
		Accepted: make([]float64, SeriesLen), Rejected: make([]float64, SeriesLen), Locked: make([]float64, SeriesLen),
		LatencyAvgMs: make([]float64, SeriesLen), LatencyMaxMs: make([]float64, SeriesLen)}
	secs := SeriesStep.Seconds()
	for i := range SeriesLen {
		step := first + int64(i)
		b := &s.b[step%SeriesLen]
		if b.stamp.Load() != step {
			continue
		}
		acc := b.counts[seriesAccepted].Load()
		out.Accepted[i] = float64(acc) / secs
		out.Rejected[i] = float64(b.counts[seriesRejected].Load()) / secs
		out.Locked[i] = float64(b.counts[seriesLocked].Load()) / secs
		if acc > 0 {
			out.LatencyAvgMs[i] = float64(b.latSumUs.Load()) / float64(acc) / 1000
			out.LatencyMaxMs[i] = float64(b.latMaxUs.Load()) / 1000
		}
	}
	return out
}
