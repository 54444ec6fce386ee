package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBucketsTileTheRange checks that buckets are contiguous, ordered and
// that every value falls in the bucket whose bounds hold it.
func TestBucketsTileTheRange(t *testing.T) {
	prevHi := uint64(0)
	for i := range histBuckets {
		lo, hi := bucketBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d]: bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo > 1<<histSubBits && float64(hi-lo+1)/float64(lo) > 1.0/(1<<histSubBits)+1e-12 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its start", i, lo, hi, 1<<histSubBits)
		}
		prevHi = hi
	}
	if prevHi != math.MaxUint64>>1 {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, uint64(math.MaxUint64>>1))
	}
}

// TestQuantileAccuracy compares quantiles with exact ones over samples
// spread across five orders of magnitude.
func TestQuantileAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 1000, 100_000} {
		var h histogram
		samples := make([]time.Duration, n)
		for i := range samples {
			samples[i] = time.Duration(math.Exp(rng.Float64()*math.Log(1e5)) * float64(time.Microsecond))
			h.record(samples[i])
		}
		slices.Sort(samples)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 1} {
			rank := min(max(int(q*float64(n)+0.5), 1), n)
			want := samples[rank-1]
			got := h.quantile(q)
			if rel := math.Abs(float64(got-want)) / float64(want); rel > 1.0/(1<<histSubBits) {
				t.Errorf("n=%d q=%v: got %v, want %v (off by %.1f%%)", n, q, got, want, rel*100)
			}
		}
		if h.count() != uint64(n) || h.max != samples[n-1] {
			t.Errorf("n=%d: count %d max %v, want %d and %v", n, h.count(), h.max, n, samples[n-1])
		}
	}
}

func TestHistogramEdges(t *testing.T) {
	var h histogram
	if got := h.quantile(0.5); got != 0 {
		t.Fatalf("empty histogram: quantile %v, want 0", got)
	}
	h.record(-time.Second) // clock step backwards: counted as 0
	h.record(3 * time.Nanosecond)
	if got := h.quantile(1); got != 3 {
		t.Fatalf("quantile(1) = %v, want 3ns", got)
	}
	if got := h.quantile(0); got != 0 {
		t.Fatalf("quantile(0) = %v, want 0", got)
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, all histogram
	for i := range 1000 {
		d := time.Duration(i*i) * time.Microsecond
		all.record(d)
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	a.merge(&b)
	if a.counts != all.counts || a.n != all.n || a.max != all.max {
		t.Fatal("merging two histograms differs from recording into one")
	}
}

// count returns the number of recorded latencies.
func (h *histogram) count() uint64 { return h.n }
