package spool

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name     string
		initial  time.Duration
		max      time.Duration
		attempts int
		rnd      func() float64
		want     time.Duration
	}{
		{"first retry", s, 5 * time.Minute, 1, nil, s},
		{"second", s, 5 * time.Minute, 2, nil, 2 * s},
		{"ninth", s, 5 * time.Minute, 9, nil, 256 * s},
		{"capped", s, 5 * time.Minute, 10, nil, 5 * time.Minute},
		{"huge attempts do not overflow", s, 5 * time.Minute, 1000, nil, 5 * time.Minute},
		{"shift 62", s, 5 * time.Minute, 63, nil, 5 * time.Minute},
		{"zero attempts", 3 * s, 5 * time.Minute, 0, nil, 3 * s},
		{"jitter low edge", 10 * s, time.Hour, 1, func() float64 { return 0 }, 8 * s},
		{"jitter middle", 10 * s, time.Hour, 1, func() float64 { return 0.5 }, 10 * s},
		{"jitter high edge", 10 * s, time.Hour, 2, func() float64 { return 0.999999 }, 23999992 * time.Microsecond},
		{"jitter applies above cap", s, 5 * s, 20, func() float64 { return 1 }, 6 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := backoff(tt.initial, tt.max, tt.attempts, tt.rnd)
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("backoff = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffJitterSpread(t *testing.T) {
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		d := backoff(time.Second, time.Minute, 3, jitter)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 3200*time.Millisecond || hi >= 4800*time.Millisecond {
		t.Fatalf("jitter outside ±20%% of 4s: [%v, %v]", lo, hi)
	}
	if hi-lo < time.Second {
		t.Fatalf("jitter spread too narrow: [%v, %v]", lo, hi)
	}
}

func TestClassify(t *testing.T) {
	netErr := errors.New("dial unix: connection refused")
	tests := []struct {
		status int
		err    error
		want   outcome
	}{
		{200, nil, outcomeDone},
		{202, nil, outcomeDone},
		{299, nil, outcomeDone},
		{0, netErr, outcomeRetry},
		{0, nil, outcomeRetry},
		{200, netErr, outcomeRetry},
		{500, nil, outcomeRetry},
		{502, nil, outcomeRetry},
		{503, nil, outcomeRetry},
		{599, nil, outcomeRetry},
		{408, nil, outcomeRetry},
		{425, nil, outcomeRetry},
		{429, nil, outcomeRetry},
		{400, nil, outcomeDead},
		{401, nil, outcomeDead},
		{403, nil, outcomeDead},
		{404, nil, outcomeDead},
		{413, nil, outcomeDead},
		{302, nil, outcomeDead},
		{101, nil, outcomeDead},
		{600, nil, outcomeDead},
	}
	for _, tt := range tests {
		if got := classify(tt.status, tt.err); got != tt.want {
			t.Errorf("classify(%d, %v) = %d, want %d", tt.status, tt.err, got, tt.want)
		}
	}
}

func TestClip(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"short", "short"},
		{"line\nbreak\ttab", "line break tab"},
		{strings.Repeat("a", 300), strings.Repeat("a", maxReasonLen)},
		{strings.Repeat("a", maxReasonLen-1) + "é", strings.Repeat("a", maxReasonLen-1)},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	}
	for _, tt := range tests {
		if got := clip(tt.in); got != tt.want {
			t.Errorf("clip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestExpiredReason: an expired dead letter keeps the cause of its last
// failed attempt.
func TestExpiredReason(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		last     string
		want     string
	}{
		{0, "", reasonExpired},
		{0, "gateway status 502: x", reasonExpired},
		{1, "", "expired after 1 attempt"},
		{1, "gateway status 502: bad gateway", "expired after 1 attempt; last: gateway status 502: bad gateway"},
		{10, "send: dial unix /run/gw.sock: connect: no such file", "expired after 10 attempts; last: send: dial unix /run/gw.sock: connect: no such file"},
		{3, "", "expired after 3 attempts"},
		{2, strings.Repeat("x", 400), "expired after 2 attempts; last: " + strings.Repeat("x", maxReasonLen-len("expired after 2 attempts; last: "))},
	} {
		got := ExpiredReason(tc.attempts, tc.last)
		if got != tc.want {
			t.Errorf("ExpiredReason(%d, %q) = %q, want %q", tc.attempts, tc.last, got, tc.want)
		}
		if !IsExpired(got) {
			t.Errorf("IsExpired(%q) is false", got)
		}
	}
	if IsExpired("gateway status 400: no") {
		t.Error("a refusal is not an expiry")
	}
}
