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
// the admin endpoint, which ends the stream); tailGiveUp the default of
// --reconnect, how long it keeps trying before it gives up.
const (
	tailReconnect = time.Second
	tailGiveUp    = time.Minute
)

// newTailCommand builds `caddy hooks tail`.
func newTailCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tail [--cluster] [--base <path>] [--hook <name>] [--status <s>] [--reason <text>] [--node <name>] [--since <d>] [--json]",
		Short: "Follows the events of a running hooks handler, one line each",
		Long: `
Prints the events a running hooks handler answers as they happen, one line each:
time, hook, status, dispatch state, time at the edge, client address, and the
gateway's run id or the reason of a refusal. Refused requests come as rows that
count them per client address, status and reason per minute ("rejections", sent
again as the count grows). With --json each line is the event's JSON.

It reads the live tail of Caddy's admin API (admin.api.hooks, GET
/hooks/events/stream), found as "caddy reload" finds it: --address, else the admin
address of --config (or of ./Caddyfile), else localhost:2019. --base chooses the
handler when the config has several.

With --cluster it follows every node of the cluster through the one it reaches
(?scope=cluster): each line names the node that answered the request, and a line
says when a node stops answering (it is named; the tail goes on with the others)
and when it answers again.

When the stream ends (a "caddy reload", Caddy restarting) it says so on stderr and
reconnects, and says when it is back; after --reconnect (default 1m) without an
answer it gives up, naming the admin endpoint, and exits with status 1.

Filters: --hook (a hook name), --status (401, 4xx, accepted, rejected or operator),
--reason (a part of the reason), --node (one node of the cluster). --since 10m
first prints the log's entries of the last 10 minutes. --count stops after that
many lines.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTail(cmd.Context(), cmd.Flags(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	adminapi.AddFlags(fl)
	adminapi.AddBaseFlag(fl)
	fl.String("hook", "", "Only this hook name (e.g. wake, github)")
	fl.String("status", "", "Only this status: a code (401), a class (4xx), accepted, rejected or operator")
	fl.String("reason", "", "Only entries whose reason contains this text")
	fl.String("node", "", "Only the entries of this node of the cluster")
	fl.Bool("cluster", false, "Follow every node of the cluster, each line with its node")
	fl.Duration("reconnect", tailGiveUp, "How long to keep reconnecting after the stream ends before giving up")
	fl.String("since", "", "First print the entries of this last period (e.g. 10m)")
	fl.Bool("json", false, "Print each entry as JSON")
	fl.Int("count", 0, "Stop after this many lines (0: follow until interrupted)")
	return cmd
}

// tailer prints entries of the stream.
type tailer struct {
	out     io.Writer
	errOut  io.Writer // notes about the connection
	json    bool
	cluster bool // every node: lines name their node
	left    int  // lines still to print; < 0: no limit
	query   url.Values
	missing *string // the nodes last said not to answer (nil: not said yet)
}

// errTailDone ends the tail after --count lines.
var errTailDone = errors.New("done")

// runTail follows the stream until ctx ends (or --count lines, or it
// gives up reconnecting: an error naming the endpoint).
func runTail(ctx context.Context, fl *pflag.FlagSet, out, errOut io.Writer) error {
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
	for _, name := range []string{"hook", "status", "reason", "node"} {
		if v, _ := fl.GetString(name); v != "" {
			q.Set(name, v)
		}
	}
	t := &tailer{out: out, errOut: errOut, query: q, left: -1}
	t.json, _ = fl.GetBool("json")
	if t.cluster, _ = fl.GetBool("cluster"); t.cluster {
		q.Set("scope", adminapi.ScopeCluster)
	}
	if n, _ := fl.GetInt("count"); n > 0 {
		t.left = n
	}
	giveUp, _ := fl.GetDuration("reconnect")
	if since, _ := fl.GetString("since"); since != "" {
		if err := t.backlog(ac, since); err != nil {
			return tailResult(err)
		}
	}
	var last string         // the Last-Event-ID to resume from
	var downSince time.Time // when the stream ended (zero: it runs)
	for first := true; ; first = false {
		opened := false
		err := t.stream(ctx, ac, &last, func() {
			opened = true
			if !downSince.IsZero() {
				fmt.Fprintf(t.errOut, "(reconnected to the admin API at %s after %s)\n", addr, time.Since(downSince).Round(time.Second))
				downSince = time.Time{}
			}
		})
		switch {
		case errors.Is(err, errTailDone), ctx.Err() != nil:
			return nil
		case first && !opened && err != nil:
			if errors.Is(err, adminapi.ErrUnreachable) {
				return fmt.Errorf("no Caddy admin API answers at %s (is Caddy running? --address)", addr)
			}
			return err
		}
		now := time.Now()
		if downSince.IsZero() {
			downSince = now
			why := "it ended"
			if err != nil {
				why = err.Error()
			}
			fmt.Fprintf(t.errOut, "(the stream from the admin API at %s stopped: %s; reconnecting for up to %s)\n", addr, why, giveUp)
		} else if now.Sub(downSince) >= giveUp {
			why := "its stream keeps ending"
			if err != nil {
				why = err.Error()
			}
			return fmt.Errorf("gave up on the admin API at %s after %s without a stream: %s", addr, now.Sub(downSince).Round(time.Second), why)
		}
		select { // the admin endpoint was replaced (a reload), or Caddy restarts: reconnect
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

// stream reads the live tail until it ends, printing each entry; opened
// is called once the stream is open.
func (t *tailer) stream(ctx context.Context, ac *adminapi.Client, last *string, opened func()) error {
	resp, err := ac.Stream(ctx, adminapi.Prefix+"events/stream?"+t.query.Encode(), *last)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	opened()
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
			line = tailLine(typ, data, t.cluster)
		}
	case "lost":
		var l struct{ Node string }
		_ = json.Unmarshal(data, &l)
		line = "(the tail fell behind: some changes were not shown)"
		if l.Node != "" {
			line = fmt.Sprintf("(the tail fell behind on node %s: some of its changes were not shown)", safetext.Line(l.Node))
		}
	case "nodes":
		if line = t.nodes(data); line == "" {
			return nil
		}
	case "skipped":
		var sk struct {
			Node  string `json:"node"`
			Count uint64 `json:"count"`
			Max   int    `json:"max_per_second"`
		}
		if json.Unmarshal(data, &sk) != nil {
			return nil
		}
		if t.json {
			b, _ := json.Marshal(struct {
				Type  string `json:"type"`
				Node  string `json:"node"`
				Count uint64 `json:"count"`
			}{"skipped", sk.Node, sk.Count})
			line = string(safetext.JSON(b))
		} else {
			line = fmt.Sprintf("(node %s: %d changes not shown: a cluster tail carries at most %d a second from each node; narrow it with --hook, --status or --node)",
				fieldText(sk.Node, "-"), sk.Count, sk.Max)
		}
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

// nodes is the line saying, when it changed, which nodes of the cluster
// follow the tail ("" when it did not): a node that stopped answering is
// named (the tail goes on with the others), and so is its return.
func (t *tailer) nodes(data []byte) string {
	var n adminapi.Nodes
	if json.Unmarshal(data, &n) != nil {
		return ""
	}
	var names []string
	for _, m := range n.Missing {
		names = append(names, m.Node)
	}
	key := strings.Join(names, " ")
	if t.missing != nil && key == *t.missing {
		return ""
	}
	t.missing = &key
	var line string
	switch {
	case t.json:
		b, _ := json.Marshal(struct {
			Type string `json:"type"`
			adminapi.Nodes
		}{"nodes", n})
		line = string(safetext.JSON(b))
	case len(n.Missing) == 0:
		line = fmt.Sprintf("(cluster: all %d nodes answer)", n.Asked)
	default:
		var why []string
		for _, m := range n.Missing {
			why = append(why, fmt.Sprintf("node %s %s", safetext.Line(m.Node), safetext.Line(m.Why)))
		}
		line = fmt.Sprintf("(cluster: %d of %d nodes answer; %s; following the others)", len(n.Answered), n.Asked, strings.Join(why, "; "))
	}
	return line
}

// tailLine formats an entry as one line (with its node first when
// withNode). Every field that a sender can influence (hook, reason, run
// id) goes through publicReason, so that no control character reaches
// the terminal.
func tailLine(typ string, data []byte, withNode bool) string {
	node := func(n string) string {
		if !withNode {
			return ""
		}
		return fmt.Sprintf("%-20s ", fieldText(n, "-"))
	}
	if typ == "rejections" {
		var r eventlog.RejectionJSON
		if json.Unmarshal(data, &r) != nil {
			return "(unreadable rejection row)"
		}
		return fmt.Sprintf("%s  %s%-12s %3d  %-10s %8s  %-15s  %s (×%d this minute)", r.Last.Local().Format(time.TimeOnly), node(r.Node),
			fieldText(r.Hook, "-"), r.Status, "refused", "", r.Client, safetext.Line(r.Reason), r.Count)
	}
	var e eventlog.EventJSON
	if json.Unmarshal(data, &e) != nil {
		return "(unreadable event)"
	}
	if e.Type == eventlog.TypeOperator {
		return fmt.Sprintf("%s  %soperator %s: %s %s: %s", e.Time.Local().Format(time.TimeOnly), node(e.Node),
			fieldText(e.Operator, "-"), fieldText(e.Action, "-"), safetext.Line(e.Target), safetext.Line(e.Reason))
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
	return fmt.Sprintf("%s  %s%-12s %3d  %-10s %8s  %-15s  %s", e.Time.Local().Format(time.TimeOnly), node(e.Node), fieldText(e.Hook, "-"),
		e.Status, fieldText(e.State, "-"), fmt.Sprintf("%.1fms", e.LatencyMs), safetext.Line(e.Client), detail)
}

// fieldText is s made safe for a terminal, or dflt when empty.
func fieldText(s, dflt string) string {
	if s = safetext.Line(s); s == "" {
		return dflt
	}
	return s
}
