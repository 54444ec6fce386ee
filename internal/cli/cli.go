// Package cli holds the `caddy hooks` commands that work on a running
// Caddy through the hooks admin API (internal/adminapi), or on a spool
// file when Caddy is stopped: spool (dead letters), tail (the live event
// log), console (the console page relayed to a local browser), version
// (this binary's, or the running Caddy's) and providers (the senders a
// verify block knows, from internal/verify's registry). They
// need nothing of the handler itself; caddyhook's command.go registers
// them with the commands that do (test, import).
package cli

import "github.com/spf13/cobra"

// Commands returns fresh `caddy hooks` subcommands of this package.
func Commands() []*cobra.Command {
	return []*cobra.Command{newSpoolCommand(), newTailCommand(), newConsoleCommand(), newVersionCommand(), newProvidersCommand()}
}
