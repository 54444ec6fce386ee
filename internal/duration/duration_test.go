package duration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// TestParse: what Caddy reads is read the same; what it cannot read gets
// the units and examples, never Caddy's rewritten string.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"2d", 48 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"500ms", 500 * time.Millisecond, true},
		{"0", 0, true},
		{"2days", 0, false},
		{"1day", 0, false},
		{"30", 0, false},
		{"10 m", 0, false},
		{"m", 0, false},
		{"", 0, false},
		{"2w", 0, false},
	} {
		got, err := Parse(tc.in)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		var de *Error
		if err == nil || !errors.As(err, &de) {
			t.Fatalf("Parse(%q) = %v, %v; want an *Error", tc.in, got, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, Units) || !strings.Contains(msg, "e.g. 90s") || !strings.Contains(msg, `"`+tc.in+`"`) || strings.Contains(msg, "hays") {
			t.Errorf("Parse(%q): %s", tc.in, msg)
		}
	}
}

// FuzzParse: Parse never panics, accepts exactly what caddy.ParseDuration
// accepts, with the same value, and its error always quotes the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"90s", "2d", "2days", "1.5d", "-1h", "+3m", "30", "", "d", "1d2d", "1e3s", "5µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		want, werr := caddy.ParseDuration(s)
		if (err == nil) != (werr == nil) || got != want && err == nil {
			t.Fatalf("Parse(%q) = %v, %v; caddy.ParseDuration: %v, %v", s, got, err, want, werr)
		}
		if err != nil && !strings.Contains(err.Error(), Units) {
			t.Fatalf("Parse(%q): %v", s, err)
		}
	})
}
