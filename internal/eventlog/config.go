package eventlog

import (
	"fmt"
	"time"
)

// Defaults: safe for a public ingress on a small machine (the log then
// holds at most about DefaultMaxBytes plus the rejection rows).
const (
	DefaultMaxEvents     = 10_000
	DefaultMaxBytes      = 16 << 20
	DefaultRetain        = 24 * time.Hour
	DefaultMaxBody       = 64 << 10
	DefaultMaxRejections = 10_000

	// MaxMaxEvents, MaxMaxBytes and MaxRetain bound what a config may ask.
	MaxMaxEvents     = 1_000_000
	MaxMaxBytes      = 1 << 30
	MaxRetain        = 30 * 24 * time.Hour
	MaxMaxBody       = 16 << 20
	MaxMaxRejections = 1_000_000
)

// Bounds are what a log keeps: at most MaxEvents accepted events taking
// at most MaxBytes (bodies included), none older than Retain, and at most
// MaxRejections aggregated rejection rows. Zero fields take the defaults.
type Bounds struct {
	MaxEvents     int
	MaxBytes      int64
	Retain        time.Duration
	MaxRejections int
}

// withDefaults fills the zero fields.
func (b Bounds) withDefaults() Bounds {
	if b.MaxEvents == 0 {
		b.MaxEvents = DefaultMaxEvents
	}
	if b.MaxBytes == 0 {
		b.MaxBytes = DefaultMaxBytes
	}
	if b.Retain == 0 {
		b.Retain = DefaultRetain
	}
	if b.MaxRejections == 0 {
		b.MaxRejections = DefaultMaxRejections
	}
	return b
}

// Validate checks the ranges; errors name the Caddyfile option.
func (b Bounds) Validate() error {
	switch {
	case b.MaxEvents < 0 || b.MaxEvents > MaxMaxEvents:
		return fmt.Errorf("events: max_events %d must be between 1 and %d", b.MaxEvents, MaxMaxEvents)
	case b.MaxBytes < 0 || b.MaxBytes > MaxMaxBytes:
		return fmt.Errorf("events: max_bytes %d must be between 1 and %d", b.MaxBytes, int64(MaxMaxBytes))
	case b.MaxBytes > 0 && b.MaxBytes < 64<<10:
		return fmt.Errorf("events: max_bytes %d must be at least 64KiB", b.MaxBytes)
	case b.Retain < 0 || b.Retain > MaxRetain:
		return fmt.Errorf("events: retain %s must be between 1s and %s", b.Retain, MaxRetain)
	case b.Retain > 0 && b.Retain < time.Second:
		return fmt.Errorf("events: retain %s must be at least 1s", b.Retain)
	case b.MaxRejections < 0 || b.MaxRejections > MaxMaxRejections:
		return fmt.Errorf("events: max_rejections %d must be between 1 and %d", b.MaxRejections, MaxMaxRejections)
	}
	return nil
}
