package caddyhook

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestBaseFlagIsOneName: every `caddy hooks …` command that chooses a
// hooks handler by its base path calls the flag --base (--path is a
// deprecated alias where it was the name).
func TestBaseFlagIsOneName(t *testing.T) {
	var with []string
	var walk func(prefix string, c *cobra.Command)
	walk = func(prefix string, c *cobra.Command) {
		name := prefix + " " + c.Name()
		check := func(f *pflag.Flag) {
			if !strings.Contains(strings.ToLower(f.Usage), "base path") || f.Deprecated != "" {
				return
			}
			if f.Name != "base" {
				t.Errorf("%s --%s chooses the handler by its base path: call it --base", name, f.Name)
			}
			with = append(with, name)
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(name, sub)
		}
	}
	for _, c := range hooksSubcommands() {
		walk("caddy hooks", c)
	}
	for _, want := range []string{"caddy hooks test", "caddy hooks tail", "caddy hooks spool"} {
		found := false
		for _, w := range with {
			found = found || w == want
		}
		if !found {
			t.Errorf("%s has no --base flag (commands with one: %v)", want, with)
		}
	}
}
