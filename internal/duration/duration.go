// Package duration reads the durations a person writes in a config
// (max_age 2d, tolerance 5m, rate 10/1m) as Caddy reads them, and when
// one cannot be read says how to write it: the units it accepts, with
// examples, instead of the parser's view of a rewritten string (Caddy
// turns "2days" into "48hays" before Go's parser sees it).
package duration

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Units are the units a duration may be written in, as Caddy's
// ParseDuration reads them (Go's, and d for days).
const Units = "ns, us (or µs), ms, s, m, h, d"

// Parse reads s as caddy.ParseDuration does (Go's units and d for days:
// 90s, 1h30m, 2d). The error of a string it cannot read names the
// accepted units and gives examples.
func Parse(s string) (time.Duration, error) {
	d, err := caddy.ParseDuration(s)
	if err != nil {
		return 0, &Error{Input: s}
	}
	return d, nil
}

// Error is a string that is no duration.
type Error struct {
	Input string
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("%q is not a duration: write a number and a unit, the units being %s (e.g. 90s, 10m, 1h30m, 2d)", e.Input, Units)
}
