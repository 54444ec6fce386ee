package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/version"
)

// newVersionCommand builds `caddy hooks version`.
func newVersionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version [--formats] [--json] [--running [--address <admin>]]",
		Short: "Prints the version of caddyhook in this binary (or in the running Caddy)",
		Long: `
Prints caddyhook's release version, as the first line: "caddyhook v0.9.0", then
the module version Go recorded in the binary, the VCS revision and the Go version.
--formats adds the stored and wire formats this build writes and the oldest
version of each that it reads (the README's compatibility promise); --json prints
all of it as JSON.

--running asks the running Caddy instead, through its admin API (GET
/hooks/version), found as "caddy reload" finds it: --address, else the admin
address of --config (or of ./Caddyfile), else localhost:2019.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(cmd.Flags(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.Bool("formats", false, "Also list the stored and wire formats and their versions")
	fl.Bool("json", false, "Print as JSON")
	fl.Bool("running", false, "Ask the running Caddy through its admin API")
	fl.String("address", "", "Admin API address of the running Caddy (with --running)")
	fl.String("config", "", "Config file whose admin address to use (with --running)")
	fl.String("adapter", "", "Adapter of --config")
	return cmd
}

// runVersion prints this binary's version, or the running Caddy's.
func runVersion(fl *pflag.FlagSet, out io.Writer) error {
	v := adminapi.VersionOf()
	if running, _ := fl.GetBool("running"); running {
		a, addr, err := adminapi.FromFlags(fl)
		if err != nil {
			return err
		}
		v = adminapi.Version{}
		if err := a.Do("GET", adminapi.Prefix+"version", nil, &v); err != nil {
			return fmt.Errorf("admin API at %s: %w", addr, err)
		}
	}
	if asJSON, _ := fl.GetBool("json"); asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintln(out, v.Build.String())
	fmt.Fprintf(out, "cluster level %d, admin API %d\n", v.ClusterLevel, v.API)
	if formats, _ := fl.GetBool("formats"); formats {
		writeFormats(out, v.Formats)
	}
	return nil
}

// writeFormats prints the format table.
func writeFormats(out io.Writer, fs []version.Format) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "store\twrites\treads\tformat\tnote")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%d\t%d..%d\t%s\t%s\n", f.Store, f.Writes, f.Reads, f.Writes, f.What, f.Note)
	}
	_ = tw.Flush()
}
