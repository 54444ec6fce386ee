package spool

// Ops is the operator's control surface of a spool. The admin API
// (admin.api.hooks) and `caddy hooks spool` use only this, so every spool
// engine (the local bbolt Store, a cluster spool, a remote one reached
// through the admin API) is operated the same way. Implementations bound
// their own waits.
type Ops interface {
	// Status returns a snapshot: depth, bytes, dead letters, oldest age,
	// paused, rate.
	Status() (Stats, error)
	// DeadLetters returns the dead letters in acceptance order, each with
	// its reason in LastError.
	DeadLetters() ([]*Event, error)
	// Retry moves the dead letters with the given ids (all when none are
	// given) back to the delivery queue and returns how many moved; unknown
	// ids are ignored.
	Retry(ids ...string) (int, error)
	// Drop deletes the dead letters with the given ids (all when none are
	// given) and returns how many were deleted; unknown ids are ignored.
	Drop(ids ...string) (int, error)
	// Pause stops handing out deliveries (those in flight finish);
	// accepting continues. The state lasts until Resume.
	Pause() error
	// Resume continues delivery where Pause stopped it, in order.
	Resume() error
}

// Status implements Ops: Stats, or ErrClosed after Close.
func (s *Store) Status() (Stats, error) {
	s.closeMu.RLock()
	closed := s.closed
	s.closeMu.RUnlock()
	if closed {
		return Stats{}, ErrClosed
	}
	return s.Stats(), nil
}

// Pause implements Ops. It lasts across config reloads (the Store is
// shared) but not across a restart, and the time it holds an event does
// not count toward MaxAge (see pause.go).
func (s *Store) Pause() error { return s.setPaused(true) }

// Resume implements Ops.
func (s *Store) Resume() error { return s.setPaused(false) }

// Interface guard
var _ Ops = (*Store)(nil)
