//go:build race

package tmpl

// raceEnabled reports a -race build, where sync.Pool drops items.
const raceEnabled = true
