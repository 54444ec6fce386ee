//go:build race

package tmpl

// raceEnabled: the race detector's instrumentation allocates, so the
// allocation counts of the tests do not hold under it.
const raceEnabled = true
