package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// tailReconnect is the wait before the tail reconnects (a reload replaces
// the admin endpoint, which ends the stream).
const tailReconnect = time.Second

// newTailCommand builds `caddy hooks tail`.
func newTailCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tail [--base <path>] [--hook <name>] [--status <s>] [--reason <text>] [--since <d>] [--json]",
		Short: "Follows the events of a running hooks handler, one line each",
		Long: `
Prints the events a running hooks handler answers as they happen, one line each:
time, hook, status, dispatch state, time at the edge, client address, and the
gateway's run id or the reason of a refusal. Refused requests come as rows that
count them per client address, status and reason per minute ("rejections", sent
again as the count grows). With --json each line is the event's JSON.

It reads the live tail of Caddy's admin API (admin.api.hooks, GET
/hooks/events/stream), found as "caddy reload" finds it: --address, else the admin
address of --config (or of ./Caddyfile), else localhost:2019; it reconnects after
a "caddy reload". --base chooses the handler when the config has several.

Filters: --hook (a hook name), --status (401, 4xx, accepted or rejected),
--reason (a part of the reason). --since 10m first prints the log's entries of the
last 10 minutes. --count stops after that many lines.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTail(cmd.Context(), cmd.Flags(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	adminapi.AddFlags(fl)
	adminapi.AddBaseFlag(fl)
	fl.String("hook", "", "Only this hook name (e.g. wake, github)")
	fl.String("status", "", "Only this status: a code (401), a class (4xx), accepted or rejected")
	fl.String("reason", "", "Only entries whose reason contains this text")
	fl.String("since", "", "First print the entries of this last period (e.g. 10m)")
	fl.Bool("json", false, "Print each entry as JSON")
	fl.Int("count", 0, "Stop after this many lines (0: follow until interrupted)")
	return cmd
}

// tailer prints entries of the stream.
type tailer struct {
	out   io.Writer
	json  bool
	left  int // lines still to print; < 0: no limit
	query url.Values
}

// errTailDone ends the tail after --count lines.
var errTailDone = errors.New("done")

// runTail follows the stream until ctx ends (or --count lines).
func runTail(ctx context.Context, fl *pflag.FlagSet, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ac, addr, err := adminapi.FromFlags(fl)
	if err != nil {
		return err
	}
	q := url.Values{}
	if base := adminapi.Base(fl); base != "" {
		q.Set("path", base)
	}
	for _, name := range []string{"hook", "status", "reason"} {
		if v, _ := fl.GetString(name); v != "" {
			q.Set(name, v)
		}
	}
	t := &tailer{out: out, query: q, left: -1}
	t.json, _ = fl.GetBool("json")
	if n, _ := fl.GetInt("count"); n > 0 {
		t.left = n
	}
	if since, _ := fl.GetString("since"); since != "" {
		if err := t.backlog(ac, since); err != nil {
			return tailResult(err)
		}
	}
	var last string // the Last-Event-ID to resume from
	for first := true; ; first = false {
		err := t.stream(ctx, ac, &last)
		switch {
		case errors.Is(err, errTailDone), ctx.Err() != nil:
			return nil
		case first && err != nil:
			if errors.Is(err, adminapi.ErrUnreachable) {
				return fmt.Errorf("no Caddy admin API answers at %s (is Caddy running? --address)", addr)
			}
			return err
		}
		select { // the admin endpoint was replaced (a reload): reconnect
		case <-ctx.Done():
			return nil
		case <-time.After(tailReconnect):
		}
	}
}

// tailResult maps the end of the tail.
func tailResult(err error) error {
	if errors.Is(err, errTailDone) {
		return nil
	}
	return err
}

// backlog prints the log's entries since the given period, oldest first.
func (t *tailer) backlog(ac *adminapi.Client, since string) error {
	q := url.Values{}
	maps.Copy(q, t.query)
	q.Set("since", since)
	q.Set("limit", strconv.Itoa(eventlog.MaxLimit))
	var page struct {
		Entries []json.RawMessage `json:"entries"`
	}
	if err := ac.Do(http.MethodGet, adminapi.Prefix+"events?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	for _, v := range slices.Backward(page.Entries) {
		var typ struct{ Type string }
		_ = json.Unmarshal(v, &typ)
		if err := t.print(typ.Type, v); err != nil {
			return err
		}
	}
	return nil
}

// stream reads the live tail until it ends, printing each entry.
func (t *tailer) stream(ctx context.Context, ac *adminapi.Client, last *string) error {
	resp, err := ac.Stream(ctx, adminapi.Prefix+"events/stream?"+t.query.Encode(), *last)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var typ, id string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if typ != "" && len(data) > 0 {
				if err := t.print(typ, data); err != nil {
					return err
				}
				if id != "" {
					*last = id
				}
			}
			typ, id, data = "", "", nil
		case strings.HasPrefix(line, "event: "):
			typ = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[len("data: "):]...)
		}
	}
	return sc.Err()
}

// print writes one entry (typ event or rejections; "lost" is a note).
func (t *tailer) print(typ string, data []byte) error {
	var line string
	switch typ {
	case "event", "rejections":
		if t.json {
			line = string(safetext.JSON(data)) // the same JSON, no control or bidi character raw
		} else {
			line = tailLine(typ, data)
		}
	case "lost":
		line = "(the tail fell behind: some changes were not shown)"
	default:
		return nil
	}
	if _, err := fmt.Fprintln(t.out, line); err != nil {
		return err
	}
	if t.left > 0 {
		if t.left--; t.left == 0 {
			return errTailDone
		}
	}
	return nil
}

// tailLine formats an entry as one line. Every field that a sender can
// influence (hook, reason, run id) goes through publicReason, so that no
// control character reaches the terminal.
func tailLine(typ string, data []byte) string {
	if typ == "rejections" {
		var r eventlog.RejectionJSON
		if json.Unmarshal(data, &r) != nil {
			return "(unreadable rejection row)"
		}
		return fmt.Sprintf("%s  %-12s %3d  %-10s %8s  %-15s  %s (×%d this minute)", r.Last.Local().Format(time.TimeOnly),
			fieldText(r.Hook, "-"), r.Status, "refused", "", r.Client, safetext.Line(r.Reason), r.Count)
	}
	var e eventlog.EventJSON
	if json.Unmarshal(data, &e) != nil {
		return "(unreadable event)"
	}
	detail := "run=" + fieldText(e.RunID, "-")
	if e.Reason != "" {
		detail = safetext.Line(e.Reason)
	} else if len(e.Dispatch) > 0 && e.Dispatch[0].Error != "" {
		detail = safetext.Line(e.Dispatch[0].Error)
	}
	if e.ReplayOf != "" {
		detail += " replay-of=" + safetext.Line(e.ReplayOf)
	}
	return fmt.Sprintf("%s  %-12s %3d  %-10s %8s  %-15s  %s", e.Time.Local().Format(time.TimeOnly), fieldText(e.Hook, "-"),
		e.Status, e.State, fmt.Sprintf("%.1fms", e.LatencyMs), e.Client, detail)
}

// fieldText is s made safe for a terminal, or dflt when empty.
func fieldText(s, dflt string) string {
	if s = safetext.Line(s); s == "" {
		return dflt
	}
	return s
}
