package caddyhook

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// TestTailCommand: `caddy hooks tail` prints a line per event through the
// admin API, with the filters as flags, and a refused request's row; no
// control character a sender put in a hook name reaches the terminal;
// --json prints the events' JSON. (On main there is no tail command.)
func TestTailCommand(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{})
	address := "unix/" + adm.sock
	tail := func(args ...string) (chan string, func()) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		done := make(chan string, 1)
		root := &cobra.Command{Use: "hooks", SilenceUsage: true}
		root.AddCommand(hooksSubcommands()...)
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"tail", "--address", address}, args...))
		go func() {
			err := root.ExecuteContext(ctx)
			if err != nil {
				errOut.WriteString(err.Error())
			}
			done <- out.String() + errOut.String()
		}()
		return done, cancel
	}
	waitSubscribers := func(n int) {
		testkit.WaitForState(t, func() string { return "the tails did not connect" }, func() bool {
			lh := liveHandlers()
			return len(lh) == 1 && lh[0].view.events.eventLog().Subscribers() >= n
		})
	}
	plain, stop1 := tail("--count", "3")
	defer stop1()
	agents, stop2 := tail("--hook", "agent", "--json", "--count", "1")
	defer stop2()
	waitSubscribers(2)
	in.post("/hooks/wake", `{"text":"w"}`)
	r := in.post("/hooks/agent", `{"message":"a"}`)
	in.post("/hooks/evil%1b[2J%07", `{}`)
	out := <-plain
	t.Logf("caddy hooks tail:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], " wake ") || !strings.Contains(lines[1], "run="+r.json(t)["runId"].(string)) ||
		!strings.Contains(lines[2], "404") || !strings.Contains(lines[2], "evil") {
		t.Fatalf("tail printed:\n%s", out)
	}
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("a control character reached the terminal: %q", out)
	}
	js := strings.TrimSpace(<-agents)
	if !strings.HasPrefix(js, `{"type":"event"`) || !strings.Contains(js, `"hook":"agent"`) || strings.Count(js, "\n") != 0 {
		t.Fatalf("tail --hook agent --json printed:\n%s", js)
	}
	// --since prints the backlog first
	back, stop3 := tail("--since", "1h", "--status", "accepted", "--count", "2")
	defer stop3()
	if out := <-back; !strings.Contains(out, " wake ") || !strings.Contains(out, " agent ") {
		t.Fatalf("tail --since printed:\n%s", out)
	}
	if _, _, err := runHooksCommand("tail", "--address", "unix//nonexistent/admin.sock"); err == nil || !strings.Contains(err.Error(), "no Caddy admin API") {
		t.Fatalf("no Caddy: %v", err)
	}
	if st, _ := adm.do(http.MethodGet, "/hooks/events", ""); st != http.StatusOK {
		t.Fatal(st)
	}
}

// TestSkipReasonShown (issue 31 item 5): a request answered 204 shows the
// mapping that took it and why it dispatched nothing in the event log's
// API, in `caddy hooks tail`, and in the debug log (with the mappings
// passed over before it).
func TestSkipReasonShown(t *testing.T) {
	root := writeModules(t, t.TempDir(), map[string]string{"null.js": `export default () => null;`})
	in, adm := startOpsIngress(t, ingressOpts{hooks: "transforms_root " + root + "\n" +
		mappingLines("skip", `match_expr `+"`"+`payload.kind == "x"`+"`", `text_template "x"`, "action wake") +
		"mapping null {\n\tmatch_path skip\n\ttransform null.js\n}\n"})
	if r := in.post("/hooks/skip", `{"kind":"y"}`); r.status != http.StatusNoContent {
		t.Fatalf("POST /hooks/skip: %d %s, want 204", r.status, r.body)
	}
	const reason = "mapping null: transform returned null"
	page := adm.listEvents("limit=1")
	if len(page.events) != 1 || page.events[0].Reason != reason || page.events[0].Mapping != "null" || page.events[0].State != "skipped" {
		t.Fatalf("GET /hooks/events: %+v, want the skip with mapping null and reason %q", page.events, reason)
	}
	out, _, err := runHooksCommand("tail", "--address", "unix/"+adm.sock, "--since", "1h", "--reason", "returned null", "--count", "1")
	if err != nil || !strings.Contains(out, " 204  skipped ") || !strings.Contains(out, reason) {
		t.Fatalf("caddy hooks tail: %v\n%s", err, out)
	}
	testkit.WaitForState(t, func() string { return "no debug line for the skip in:\n" + in.logs() }, func() bool {
		logs := in.logs()
		return strings.Contains(logs, `"msg":"hook request skipped"`) && strings.Contains(logs, `"reason":"`+reason+`"`) &&
			strings.Contains(logs, `"passed_over":["skip: match_expr false"]`)
	})
}
