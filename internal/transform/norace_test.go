//go:build !race

package transform

// raceEnabled reports a -race build.
const raceEnabled = false
