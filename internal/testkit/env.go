package testkit

import (
	"os"
	"testing"
)

// UnsetEnv unsets the environment variable name for the rest of the test
// (t.Setenv restores it afterwards).
func UnsetEnv(t testing.TB, name string) {
	t.Helper()
	t.Setenv(name, "")
	os.Unsetenv(name)
}
