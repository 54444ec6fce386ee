package spool

import (
	"math/rand/v2"
	"time"
)

// jitterFraction is the ± spread applied to every backoff delay.
const jitterFraction = 0.2

// backoff returns the delay before retry number attempts (1 = first retry):
// min(max, initial·2^(attempts-1)) scaled by a factor drawn uniformly from
// [1-jitterFraction, 1+jitterFraction) by rnd (nil = no jitter).
func backoff(initial, maxDelay time.Duration, attempts int, rnd func() float64) time.Duration {
	d := maxDelay
	if shift := attempts - 1; shift < 0 {
		d = initial
	} else if shift < 62 && initial <= maxDelay>>shift {
		d = initial << shift
	}
	if rnd != nil {
		d = time.Duration(float64(d) * (1 - jitterFraction + 2*jitterFraction*rnd()))
	}
	return d
}

// jitter is the production source for backoff's random factor.
func jitter() float64 { return rand.Float64() }
