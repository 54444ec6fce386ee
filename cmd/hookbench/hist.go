package main

import (
	"math/bits"
	"time"
)

// histSubBits sets the resolution: 2^histSubBits buckets per power of two,
// so a reported quantile is within 1/32 (about 3%) of the true value.
const histSubBits = 5

// histBuckets covers every duration a time.Duration can hold.
const histBuckets = (64 - histSubBits) << histSubBits

// histogram counts latencies in log-linear buckets (HDR style): exact
// below 32 ns, then 32 buckets per octave. Recording is one add; merging
// and quantiles walk the buckets. The zero value is empty and ready.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

// bucketOf returns the bucket index of v nanoseconds.
func bucketOf(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // v>>shift is in [32, 64)
	return (shift+1)<<histSubBits + int(v>>shift) - 1<<histSubBits
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < 1<<histSubBits {
		return uint64(i), uint64(i)
	}
	shift := i>>histSubBits - 1
	mant := uint64(i&(1<<histSubBits-1) + 1<<histSubBits)
	lo = mant << shift
	return lo, lo + 1<<shift - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	h.max = max(h.max, d)
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the latency below which a fraction q (0..1) of the
// recorded ones fall: the midpoint of the bucket holding that rank,
// capped at the largest value recorded. It is 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			lo, hi := bucketBounds(i)
			return min(time.Duration(lo+(hi-lo)/2), h.max)
		}
	}
	return h.max
}
