//go:build !race

package tmpl

// raceEnabled: see race_test.go.
const raceEnabled = false
