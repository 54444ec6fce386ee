//go:build race

package caddyhook

// raceEnabled reports a -race build, where sync.Pool drops a quarter of
// what it is given back.
const raceEnabled = true
