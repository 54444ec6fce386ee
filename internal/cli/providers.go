package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// newProvidersCommand builds `caddy hooks providers`.
func newProvidersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "providers [<name>] [--json]",
		Short: "Lists the senders a mapping's verify block knows, or describes one",
		Long: `
Lists the providers a mapping's "verify <provider> { … }" block accepts, one
line each: the name, how it authenticates (hmac, standard, token, ed25519,
ecdsa, x509, jwt, digest), the endpoint handshake the edge answers for it
(the method it comes with; — for none), where its delivery id (the
idempotency key of a redelivery) and its event name ({{event}}) are read, and
what it posts (JSON or form).

With a name, describes that provider: what it signs, its handshake, the words
its verify block reads (and requires), its replay window, its default message
template, its documentation and notes. --json prints the same as JSON.
`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return runProviders(cmd.OutOrStdout(), args, asJSON)
		},
	}
	cmd.Flags().Bool("json", false, "Print as JSON")
	return cmd
}

// runProviders prints the registry, or the provider named in args.
func runProviders(out io.Writer, args []string, asJSON bool) error {
	if len(args) == 1 {
		p, ok := verify.Lookup(args[0])
		if !ok {
			if s := verify.Suggest(args[0]); s != "" {
				return fmt.Errorf("no provider %q; did you mean %q?", args[0], s)
			}
			return fmt.Errorf("no provider %q (caddy hooks providers lists them)", args[0])
		}
		if asJSON {
			return writeJSON(out, p)
		}
		return describeProvider(out, p)
	}
	ps := verify.Providers()
	if asJSON {
		return writeJSON(out, ps)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSCHEME\tHANDSHAKE\tDELIVERY ID\tEVENT\tBODY")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Family, handshakeMethods(p), dash(p.DeliveryID), dash(p.Event), p.Body)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\n%d providers; caddy hooks providers <name> describes one.\n", len(ps))
	return err
}

// handshakeMethods names how a provider's handshake comes: the methods
// other than POST it takes, POST for a handshake posted like a delivery,
// — for none.
func handshakeMethods(p verify.Info) string {
	switch {
	case len(p.HandshakeMethods) > 0:
		return strings.Join(p.HandshakeMethods, ",")
	case p.Handshake != "":
		return "POST"
	}
	return "—"
}

// dash is s, or — when it is empty.
func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// describeProvider prints everything the registry says of p.
func describeProvider(out io.Writer, p verify.Info) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("provider", p.Name+" ("+p.Title+")")
	row("scheme", string(p.Family))
	row("signature", p.Signature)
	row("handshake", dash(p.Handshake))
	row("delivery id", dash(p.DeliveryID))
	row("event", dash(p.Event))
	row("body", p.Body)
	if p.Tolerance > 0 {
		row("replay window", p.Tolerance.String()+" (tolerance)")
	}
	row("words", strings.Join(p.Words, ", "))
	if len(p.Required) > 0 {
		row("required", strings.Join(p.Required, ", "))
	}
	row("template", p.Template)
	row("documentation", p.Doc)
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Notes != "" {
		_, err := fmt.Fprintf(out, "\n%s\n", p.Notes)
		return err
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
