// Package succession keeps the registrations of the configs that share
// one long-lived resource (a spool, an event log), oldest first. The
// oldest registration's settings apply: during a reload that is the
// running config's, so that a config that never runs (a refused reload)
// changes nothing, and when the running config is cleaned up the next
// oldest takes over.
package succession

import (
	"slices"
	"sync"
)

// Line is the registrations of one resource, oldest first. It is safe for
// concurrent use.
type Line[T any] struct {
	mu   sync.Mutex
	regs []*Registration[T]
	// apply puts the oldest registration's value in force: called when
	// the first registration comes and whenever the oldest one changes,
	// with the line locked.
	apply func(T)
	// empty is called, with the line locked, when the last registration
	// goes (nil: nothing to do).
	empty func()
}

// New returns an empty line that applies the oldest registration's value
// with apply, and calls empty (if not nil) when none is left.
func New[T any](apply func(T), empty func()) *Line[T] {
	return &Line[T]{apply: apply, empty: empty}
}

// Registration is one config's place in a Line.
type Registration[T any] struct {
	line *Line[T]
	v    T
}

// Value is what the registration registered.
func (r *Registration[T]) Value() T { return r.v }

// Register adds v as the newest registration and returns it; the first
// one applies at once. When refuse is not nil and reports true for the
// value of any registration already in the line, nothing is added and
// Register returns nil.
func (l *Line[T]) Register(v T, refuse func(existing T) bool) *Registration[T] {
	l.mu.Lock()
	defer l.mu.Unlock()
	if refuse != nil {
		for _, r := range l.regs {
			if refuse(r.v) {
				return nil
			}
		}
	}
	r := &Registration[T]{line: l, v: v}
	l.regs = append(l.regs, r)
	if len(l.regs) == 1 {
		l.apply(v)
	}
	return r
}

// Release removes the registration; when it was the oldest, the next
// oldest applies (or empty is called when none is left). It may run more
// than once.
func (r *Registration[T]) Release() {
	l := r.line
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.regs, r)
	if i < 0 {
		return
	}
	l.regs = slices.Delete(l.regs, i, i+1)
	switch {
	case i != 0:
	case len(l.regs) > 0:
		l.apply(l.regs[0].v)
	case l.empty != nil:
		l.empty()
	}
}

// Len is the number of registrations.
func (l *Line[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.regs)
}
