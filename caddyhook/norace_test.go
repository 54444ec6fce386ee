//go:build !race

package caddyhook

// raceEnabled reports a -race build.
const raceEnabled = false
