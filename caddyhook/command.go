package caddyhook

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hooks",
		Usage: "<command>",
		Short: "Commands for the hooks webhook ingress",
		Long: `
Tools for operating the hooks handler (caddyhook). Run "caddy hooks <command> --help"
for the details of each command.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(hooksSubcommands()...)
		},
	})
}

// hooksSubcommands builds the subcommands of `caddy hooks`. Each entry is
// a constructor returning a fresh *cobra.Command, so tests can run a
// command in isolation; add new subcommands here.
func hooksSubcommands() []*cobra.Command {
	return []*cobra.Command{
		newTestCommand(),
		newSpoolCommand(),
		newImportCommand(),
		newTailCommand(),
		newConsoleCommand(),
	}
}
