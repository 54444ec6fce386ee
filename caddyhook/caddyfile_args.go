package caddyhook

import (
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/duration"
)

// The argument readers of the Caddyfile parsers (caddyfile.go,
// caddyfile_mapping.go): each reads the values of the current
// subdirective, and its errors name it.

// countAndDuration reads `<count> [<duration>]` (count from 1 to max,
// duration positive); the field names go into the errors.
func countAndDuration(d *caddyfile.Dispenser, countName string, max int, durName string) (int, caddy.Duration, error) {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return 0, 0, d.ArgErr()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > max {
		return 0, 0, d.Errf("%s: %s %q must be an integer between 1 and %d", name, countName, args[0], max)
	}
	var dur caddy.Duration
	if len(args) == 2 {
		v, err := duration.Parse(args[1])
		if err != nil {
			return 0, 0, d.Errf("%s: %s %v", name, durName, err)
		}
		if v <= 0 {
			return 0, 0, d.Errf("%s: %s %q must be a positive duration", name, durName, args[1])
		}
		dur = caddy.Duration(v)
	}
	return n, dur, nil
}

// oneArg reads exactly one argument.
func oneArg(d *caddyfile.Dispenser, dst *string) error {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("%s: expected exactly one value", name)
	}
	*dst = args[0]
	return nil
}

// choiceArg reads one argument that must be one of choices.
func choiceArg(d *caddyfile.Dispenser, dst *string, choices ...string) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	if !slices.Contains(choices, s) {
		return d.Errf("%s: %q must be %s", name, s, strings.Join(choices, " or "))
	}
	*dst = s
	return nil
}

// durationArg reads one duration.
func durationArg(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := duration.Parse(s)
	if err != nil {
		return d.Errf("%s: %v", name, err)
	}
	*dst = caddy.Duration(v)
	return nil
}

// sizeArg reads one byte size such as 256KiB or 1MB.
func sizeArg(d *caddyfile.Dispenser, dst *int64) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := humanize.ParseBytes(s)
	if err != nil || v == 0 || v > 1<<40 {
		return d.Errf("%s: invalid size %q", name, s)
	}
	*dst = int64(v)
	return nil
}

// intArg reads one integer.
func intArg(d *caddyfile.Dispenser, dst *int) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return d.Errf("%s: invalid integer %q", name, s)
	}
	*dst = v
	return nil
}

// flagArg reads an optional true/false (no value means true).
func flagArg(d *caddyfile.Dispenser, dst *bool) error {
	name := d.Val()
	args := d.RemainingArgs()
	switch {
	case len(args) == 0:
		*dst = true
	case len(args) == 1:
		v, err := strconv.ParseBool(args[0])
		if err != nil {
			return d.Errf("%s: expected true or false, got %q", name, args[0])
		}
		*dst = v
	default:
		return d.ArgErr()
	}
	return nil
}

// listArg appends the remaining arguments; required lists need one.
func listArg(d *caddyfile.Dispenser, dst *[]string, required bool) error {
	args := d.RemainingArgs()
	if required && len(args) == 0 {
		return d.Errf("%s: expected at least one value", d.Val())
	}
	*dst = append(*dst, args...)
	return nil
}

// rateArg reads one <count>/<interval> rate such as 5/s or 100/1m.
func rateArg(d *caddyfile.Dispenser, dst **SpoolRate) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	r, err := spool.ParseRate(s)
	if err != nil {
		return d.Errf("spool: %v", err)
	}
	*dst = &SpoolRate{Count: r.Count, Interval: caddy.Duration(r.Interval)}
	return nil
}
