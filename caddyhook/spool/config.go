package spool

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxBytes     int64         = 1 << 30
	DefaultMaxAge       time.Duration = 72 * time.Hour
	DefaultRetryInitial time.Duration = time.Second
	DefaultRetryMax     time.Duration = 5 * time.Minute
	DefaultWorkers      int           = 4
	DefaultLockTimeout  time.Duration = time.Second
	DefaultMaxIdentical int           = 10
)

// DBFile is the name of the bbolt file inside Config.Dir.
const DBFile = "spool.db"

// Config tunes a Store; zero values take the defaults.
type Config struct {
	Dir          string        // directory holding spool.db; created 0700 if missing
	MaxBytes     int64         // logical bytes (keys + records, queued and dead) before ErrFull
	MaxAge       time.Duration // queued events older than this are dead-lettered
	RetryInitial time.Duration // first retry delay
	RetryMax     time.Duration // retry delay ceiling
	Workers      int           // delivery goroutines: one for the wake lane, the rest (at least one) for agents
	LockTimeout  time.Duration // how long Open waits for the file lock before ErrLocked
	// MaxIdentical is how many identical answers in a row of the kind a
	// retry does not change (Repeatable) an event gets before it goes to
	// the dead letters with that answer, rather than being retried until
	// MaxAge (a transform that always throws).
	MaxIdentical int
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.RetryInitial == 0 {
		c.RetryInitial = DefaultRetryInitial
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = DefaultLockTimeout
	}
	if c.MaxIdentical == 0 {
		c.MaxIdentical = DefaultMaxIdentical
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dir == "":
		return errors.New("spool: dir is required")
	case c.MaxBytes < 0:
		return fmt.Errorf("spool: max_bytes %d is negative", c.MaxBytes)
	case c.MaxAge < 0:
		return fmt.Errorf("spool: max_age %s is negative", c.MaxAge)
	case c.RetryInitial < 0:
		return fmt.Errorf("spool: retry_initial %s is negative", c.RetryInitial)
	case c.RetryMax < c.RetryInitial:
		return fmt.Errorf("spool: retry_max %s is below retry_initial %s", c.RetryMax, c.RetryInitial)
	case c.Workers < 0:
		return fmt.Errorf("spool: workers %d is negative", c.Workers)
	case c.LockTimeout < 0:
		return fmt.Errorf("spool: lock timeout %s is negative", c.LockTimeout)
	case c.MaxIdentical < 0:
		return fmt.Errorf("spool: max_identical_errors %d is negative", c.MaxIdentical)
	}
	return nil
}

// Repeatable reports a gateway answer that a retry does not change: a
// 5xx but 502, 503 and 504, which say that the gateway (or a proxy in
// front of it) is not available now. A transform that throws (the
// gateway's 500 "hook mapping failed") answers the same to every retry.
func Repeatable(status int) bool {
	return status >= 500 && status < 600 && status != 502 && status != 503 && status != 504
}

// IdenticalReason is the dead letter's reason of an event that got the
// same Repeatable answer (why) n times in a row.
func IdenticalReason(why string, n int) string {
	return Clip(fmt.Sprintf("%s (the same answer %d times in a row: not retried further; max_identical_errors)", strings.TrimSpace(why), n))
}

// agentWorkers is the number of goroutines serving the agent lane.
func (c Config) agentWorkers() int { return max(1, c.Workers-1) }
