package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// spoolConfig resolves a spool directory as the hooks config resolves its
// "spool <dir>" (placeholders expanded, made absolute).
func spoolConfig(dir string) (spool.Config, error) {
	abs, err := filepath.Abs(caddy.NewReplacer().ReplaceKnown(dir, ""))
	if dir == "" || err != nil {
		return spool.Config{}, fmt.Errorf("spool: dir is required")
	}
	cfg := spool.Config{Dir: abs}
	return cfg, cfg.Validate()
}

// spoolCLILockTimeout is how long a spool command waits for the spool's
// file lock before concluding that a running instance holds it.
const spoolCLILockTimeout = 500 * time.Millisecond

// newSpoolCommand builds `caddy hooks spool list|retry|drop`.
func newSpoolCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spool",
		Short: "Inspects, requeues or drops the spool's dead letters",
		Long: `
Works on the dead letters of a durable-accept spool (the "spool <dir>" of a hooks
handler): events the gateway refused for good, or that were not delivered within
max_age.

While Caddy runs, the commands go through its admin API (admin.api.hooks), found
as "caddy reload" finds it: --address, else the admin address of --config (or of
./Caddyfile), else localhost:2019. The handler is the one whose spool is --dir,
or the one at --base, or the only one with a spool. When Caddy is not running
(its admin endpoint does not answer), they open the spool file in --dir. The
output is the same either way.

  status prints the queue (depth, oldest, in flight, dead letters) and, through a
         running Caddy, whether delivery runs and each delivery node's health
         (in a cluster, from any node: every delivery node, stalled ones named).
  list   prints the dead letters (id, kind, first seen, attempts, body size, last
         error); the bodies only with --body. Ids narrow the listing.
  retry  moves dead letters back to the delivery queue (all when no ids are given);
         a running Caddy delivers them at once, a stopped one when it next runs.
  drop   deletes the given dead letters; --all (and no ids) deletes every one.
  salvage  when spool.db is corrupt, moves it aside as spool.db.corrupt-<time> and
         restores every event that can still be read into a fresh spool.db (Caddy
         does the same when it starts with a corrupt spool); a sound spool is left
         alone.
`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return fmt.Errorf("unknown spool command %q: want list, retry or drop", args[0])
		},
	}
	pf := cmd.PersistentFlags()
	pf.String("dir", "", `Spool directory, as in the hooks "spool <dir>" option (required when Caddy is stopped)`)
	adminapi.AddFlags(pf)
	adminapi.AddBaseFlag(pf)

	status := &cobra.Command{
		Use:   "status [--dir <dir>] [--base <path>]",
		Short: "Prints the queue and whether delivery runs, with each delivery node's health",
		RunE: runSpoolCLI(func(c *spoolCLI, st spool.Ops, _ *cobra.Command, _ []string) error {
			return c.status(st)
		}),
	}

	list := &cobra.Command{
		Use:   "list [--dir <dir>] [--body] [<event id>...]",
		Short: "Lists the dead letters",
		RunE: runSpoolCLI(func(c *spoolCLI, st spool.Ops, cmd *cobra.Command, ids []string) error {
			body, _ := cmd.Flags().GetBool("body")
			return c.list(st, ids, body)
		}),
	}
	list.Flags().Bool("body", false, "Also print each dead letter's gateway request body")

	retry := &cobra.Command{
		Use:   "retry [--dir <dir>] [<event id>...]",
		Short: "Requeues dead letters for delivery (all when no ids are given)",
		RunE: runSpoolCLI(func(c *spoolCLI, st spool.Ops, _ *cobra.Command, ids []string) error {
			return c.retry(st, ids)
		}),
	}

	drop := &cobra.Command{
		Use:   "drop [--dir <dir>] (<event id>... | --all)",
		Short: "Deletes dead letters",
		RunE: runSpoolCLI(func(c *spoolCLI, st spool.Ops, cmd *cobra.Command, ids []string) error {
			all, _ := cmd.Flags().GetBool("all")
			return c.drop(st, ids, all)
		}),
	}
	drop.Flags().Bool("all", false, "Delete every dead letter (required when no ids are given)")

	salvage := &cobra.Command{
		Use:   "salvage --dir <dir>",
		Short: "Moves a corrupt spool file aside and restores its readable events into a fresh one",
		RunE:  runSpoolSalvage,
	}

	cmd.AddCommand(status, list, retry, drop, salvage)
	return cmd
}

// spoolCLI runs one spool command against one spool: through a running
// Caddy's admin API, or in its directory.
type spoolCLI struct {
	dir         string        // absolute spool directory
	live        bool          // operating a running Caddy's spool
	admin       string        // where the admin API was looked for
	out         io.Writer     // results
	errOut      io.Writer     // per-id complaints
	lockTimeout time.Duration // wait for the file lock
	logger      *zap.Logger
}

// spoolAction is the body of a spool subcommand, run with the spool at hand.
type spoolAction func(c *spoolCLI, st spool.Ops, cmd *cobra.Command, ids []string) error

// runSpoolCLI adapts an action to cobra: it finds the spool (through the
// admin API of a running Caddy, else in --dir, refusing politely when a
// running instance holds it), runs the action, and prints a failure as one
// plain line on stderr (the process then exits with status 1).
func runSpoolCLI(action spoolAction) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		fl := cmd.Flags()
		dir, _ := fl.GetString("dir")
		c := &spoolCLI{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(),
			lockTimeout: spoolCLILockTimeout, logger: caddy.Log().Named("hooks.spool")}
		err := c.run(fl, dir, func(st spool.Ops) error { return action(c, st, cmd, args) })
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), err)
			cmd.SilenceErrors = true // printed above, without cobra's "Error:" prefix
		}
		return err
	}
}

// run finds the spool, applies fn and closes the spool if it opened it.
func (c *spoolCLI) run(fl *pflag.FlagSet, dir string, fn func(spool.Ops) error) error {
	live, err := c.connect(fl, dir)
	if err != nil {
		return err
	}
	if live != nil {
		return fn(live)
	}
	st, err := c.open(dir)
	if err != nil {
		return err
	}
	err = fn(st)
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// open resolves dir like the hooks config does (placeholders, absolute
// path) and opens an existing spool in it; it never creates one.
func (c *spoolCLI) open(dir string) (*spool.Store, error) {
	if strings.TrimSpace(dir) == "" {
		return nil, errors.New("--dir is required: the spool directory of the hooks config")
	}
	cfg, err := spoolConfig(dir)
	if err != nil {
		return nil, err
	}
	c.dir = cfg.Dir
	if _, err := os.Lstat(filepath.Join(cfg.Dir, spool.DBFile)); err != nil { // a link: spool.Open refuses it
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no spool in %s: %s does not exist", cfg.Dir, spool.DBFile)
		}
		return nil, fmt.Errorf("spool %s: %w", cfg.Dir, err)
	}
	cfg.LockTimeout = c.lockTimeout
	st, err := spool.Open(cfg, c.logger)
	switch {
	case errors.Is(err, spool.ErrLocked):
		return nil, fmt.Errorf("spool %s is in use by a running caddyhook, and no hooks handler of a Caddy admin API at %s uses it; "+
			"pass that Caddy's --address (or --config), or stop it first", cfg.Dir, c.admin)
	case errors.Is(err, spool.ErrCorrupt):
		return nil, fmt.Errorf("%w\nNothing was changed. `caddy hooks spool salvage --dir %s` moves the file aside and restores every "+
			"readable event into a fresh spool (Caddy does the same when it next starts with this spool)", err, cfg.Dir)
	}
	return st, err
}

// runSpoolSalvage is `caddy hooks spool salvage`: spool.Recover, reported.
func runSpoolSalvage(cmd *cobra.Command, _ []string) error {
	dir, _ := cmd.Flags().GetString("dir")
	c := &spoolCLI{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(),
		lockTimeout: spoolCLILockTimeout, logger: caddy.Log().Named("hooks.spool")}
	err := c.salvage(dir)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		cmd.SilenceErrors = true
	}
	return err
}

// salvage recovers the spool in dir when it is corrupt.
func (c *spoolCLI) salvage(dir string) error {
	if strings.TrimSpace(dir) == "" {
		return errors.New("--dir is required: the spool directory of the hooks config")
	}
	cfg, err := spoolConfig(dir)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(cfg.Dir, spool.DBFile)); err != nil { // a link: spool.Open refuses it
		return fmt.Errorf("no spool in %s: %w", cfg.Dir, err)
	}
	cfg.LockTimeout = c.lockTimeout
	st, sv, err := spool.Recover(cfg, c.logger)
	if errors.Is(err, spool.ErrLocked) {
		return fmt.Errorf("spool %s is in use by a running caddyhook; stop it first", cfg.Dir)
	}
	if err != nil {
		return err
	}
	if sv == nil {
		fmt.Fprintf(c.out, "spool %s is sound; nothing to salvage\n", cfg.Dir)
	} else {
		fmt.Fprintf(c.out, "spool %s was corrupt: %v\nmoved it to %s (unchanged)\nrestored %d queued event(s) and %d dead letter(s) into a fresh %s; %d damaged page(s) or record(s) skipped\n",
			cfg.Dir, sv.Reason, sv.MovedTo, sv.Queued, sv.Dead, spool.DBFile, sv.Skipped)
	}
	return st.Close()
}

// status prints the queue and, through a running Caddy, the delivery
// health: whether delivery runs, and each delivery node.
func (c *spoolCLI) status(st spool.Ops) error {
	stats, err := st.Status()
	if err != nil {
		fmt.Fprintf(c.out, "spool %s: the queue's counters cannot be read: %v\n", c.dir, err)
	} else {
		line := fmt.Sprintf("spool %s: %d queued", c.dir, stats.Depth)
		if stats.OldestAge > 0 {
			line += fmt.Sprintf(" (oldest %s)", stats.OldestAge.Round(time.Second))
		}
		line += fmt.Sprintf(", %d dead letter(s)", stats.Dead)
		if stats.Paused {
			line += "; delivery paused here"
		}
		fmt.Fprintln(c.out, line)
	}
	as, ok := st.(*adminSpool)
	if !ok {
		fmt.Fprintln(c.out, "delivery: no running Caddy answers for this spool: nothing delivers it now")
		return nil
	}
	var d adminapi.Delivery
	if err := as.api.Do(http.MethodGet, as.uri("spool/delivery"), nil, &d); err != nil {
		return err
	}
	fmt.Fprintln(c.out, safetext.Line(d.Summary.Text))
	if len(d.Asked.Missing) > 0 {
		fmt.Fprintf(c.out, "nodes: %s\n", safetext.Line(d.Asked.Summary()))
	}
	if len(d.Nodes) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tIN FLIGHT\tLAST SUCCESS\tLAST ERROR\tRATE\tNOTE")
	for _, n := range d.Nodes {
		inFlight := strconv.Itoa(n.InFlight)
		if !n.Answered {
			inFlight = "?"
		}
		lastErr := safetext.Line(n.LastError)
		if lastErr != "" {
			lastErr += " (" + ago(n.LastErrorAt) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f/s\t%s\n", fieldText(n.Node, "this node"), n.State, inFlight,
			fieldText(ago(n.LastSuccess), "-"), fieldText(lastErr, "-"), n.Rate, fieldText(n.Note, ""))
	}
	return tw.Flush()
}

// ago says how long ago t was ("" for never).
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// list prints a summary line and the dead letters whose id is in ids (all
// when empty), then their bodies when withBody is set.
func (c *spoolCLI) list(st spool.Ops, ids []string, withBody bool) error {
	dead, err := st.DeadLetters()
	if err != nil {
		return err
	}
	dead, missing := selectDead(dead, ids)
	stats, err := st.Status()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "spool %s: %d queued for delivery, %d dead letter(s)\n", c.dir, stats.Depth, stats.Dead)
	if len(dead) > 0 {
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tFIRST SEEN\tATTEMPTS\tBODY\tLAST ERROR")
		for _, ev := range dead {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d B\t%s\n", terminalSafe(ev.ID), terminalSafe(ev.Kind),
				ev.FirstSeen.UTC().Format(time.RFC3339), ev.Attempts, len(ev.Body), terminalSafe(strings.TrimSpace(ev.LastError)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if withBody {
		for _, ev := range dead {
			fmt.Fprintf(c.out, "\n--- %s (%d bytes)\n%s\n", terminalSafe(ev.ID), len(ev.Body), printableBody(ev.Body))
		}
	}
	return c.reportMissing(missing)
}

// retry requeues the dead letters whose id is in ids, or all of them.
func (c *spoolCLI) retry(st spool.Ops, ids []string) error {
	known, missing, err := c.resolve(st, ids)
	if err != nil {
		return err
	}
	n := 0
	if len(ids) == 0 || len(known) > 0 { // never turn "no known ids" into "all"
		if n, err = st.Retry(known...); err != nil {
			return err
		}
	}
	when := "they are delivered when Caddy next runs with this spool"
	if c.live {
		when = "the running Caddy delivers them now"
	}
	fmt.Fprintf(c.out, "requeued %d dead letter(s) in %s; %s\n", n, c.dir, when)
	return c.reportMissing(missing)
}

// drop deletes the dead letters whose id is in ids, or all of them when
// all is set (and only then, so a missing argument deletes nothing).
func (c *spoolCLI) drop(st spool.Ops, ids []string, all bool) error {
	switch {
	case all && len(ids) > 0:
		return errors.New("drop takes event ids or --all, not both")
	case !all && len(ids) == 0:
		return errors.New("drop needs the event ids to delete, or --all to delete every dead letter")
	}
	known, missing, err := c.resolve(st, ids)
	if err != nil {
		return err
	}
	n := 0
	if all || len(known) > 0 {
		if n, err = st.Drop(known...); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.out, "dropped %d dead letter(s) from %s\n", n, c.dir)
	return c.reportMissing(missing)
}

// resolve splits ids into those naming a dead letter and those that do not.
func (c *spoolCLI) resolve(st spool.Ops, ids []string) (known, missing []string, err error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	dead, err := st.DeadLetters()
	if err != nil {
		return nil, nil, err
	}
	_, missing = selectDead(dead, ids)
	gone := make(map[string]bool, len(missing))
	for _, id := range missing {
		gone[id] = true
	}
	for _, id := range ids {
		if !gone[id] {
			known = append(known, id)
		}
	}
	return known, missing, nil
}

// reportMissing names each id that matched no dead letter on errOut and
// fails when there is any.
func (c *spoolCLI) reportMissing(missing []string) error {
	for _, id := range missing {
		fmt.Fprintf(c.errOut, "no dead letter with id %s\n", strconv.Quote(id))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%d of the given event ids matched no dead letter", len(missing))
	}
	return nil
}

// selectDead keeps the dead letters whose id is in ids (all when empty)
// and returns the ids that matched none, in argument order, once each.
func selectDead(dead []*spool.Event, ids []string) (sel []*spool.Event, missing []string) {
	if len(ids) == 0 {
		return dead, nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = false
	}
	for _, ev := range dead {
		if _, ok := want[ev.ID]; ok {
			want[ev.ID] = true
			sel = append(sel, ev)
		}
	}
	for _, id := range ids {
		if found, pending := want[id]; pending && !found {
			missing = append(missing, id)
			delete(want, id)
		}
	}
	return sel, missing
}

// terminalSafe returns s unchanged when it is printable on one line,
// else quoted, so stored text cannot drive the operator's terminal.
func terminalSafe(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// printableBody returns a gateway body for display: as is when it is
// valid JSON free of control characters, else quoted.
func printableBody(b []byte) string {
	if json.Valid(b) && strings.IndexFunc(string(b), func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\t' || r == unicode.ReplacementChar
	}) < 0 {
		return string(b)
	}
	return strconv.Quote(string(b))
}
