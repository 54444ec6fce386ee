package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		{"plain", "123 (caddy) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0", 3 * time.Second, true},
		{"parens and spaces in name", "9 (a) b (c) R 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 30 * time.Millisecond, true},
		{"no name", "123 caddy S 1 2", 0, false},
		{"too short", "1 (x) S 1 2 3", 0, false},
		{"not a number", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 2 0 0", 0, false},
	}
	for _, tt := range tests {
		got, err := parseStatCPU([]byte(tt.stat))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("%s: got %v, %v; want %v, ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
	}
}

// TestProcCPUCountsWork burns CPU and checks that this process's reading
// grows by as much as getrusage, read side by side, says it used: CPU
// time, not wall time, so a busy machine changes nothing.
func TestProcCPUCountsWork(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ruBefore := rusage()
	for deadline := time.Now().Add(time.Minute); rusage()-ruBefore < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("could not burn 300ms of CPU in a minute")
		}
	}
	after, _ := procCPU(os.Getpid())
	used, counted := rusage()-ruBefore, after-before
	// /proc counts in clock ticks (10ms): allow a few of them
	if counted < used-50*time.Millisecond || counted > used+50*time.Millisecond {
		t.Fatalf("%v of CPU (getrusage) counted as %v", used, counted)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tcaddy\nVmPeak:\t  999 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 1 kB\n"
	got, err := parseVmRSS(strings.NewReader(status))
	if err != nil || got != 50<<20 {
		t.Fatalf("got %d, %v; want %d", got, err, 50<<20)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: many kB\n"} {
		if _, err := parseVmRSS(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSteadyRSS(t *testing.T) {
	tests := []struct {
		samples []int64
		want    int64
	}{
		{nil, 0},
		{[]int64{7}, 7},
		{[]int64{1, 2, 90, 50, 60, 55}, 55}, // the warm-up half is ignored, then the median
		{[]int64{10, 10, 10, 40, 20, 30}, 30},
	}
	for _, tt := range tests {
		if got := steadyRSS(tt.samples); got != tt.want {
			t.Errorf("steadyRSS(%v) = %d, want %d", tt.samples, got, tt.want)
		}
	}
}
