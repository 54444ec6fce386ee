//go:build !race

package tmpl

// raceEnabled reports a -race build.
const raceEnabled = false
