//go:build race

package transform

// raceEnabled reports a -race build, where sync.Pool drops items and the
// regexp engine allocates many times more per match than normally.
const raceEnabled = true
