package caddyhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// terminalHostile are characters a sender may put in a hook name or a
// payload that a terminal acts on or hides: CSI (C1), NEL, the bidi
// override and isolate, a zero-width space.
const terminalHostile = "\u009b2J\u0085\u202egnp.exe\u2066\u200b"

// rawHostile reports a character of terminalHostile written raw.
func rawHostile(s string) bool { return strings.ContainsAny(s, "\u009b\u0085\u202e\u2066\u200b") }

// TestTailJSONFitForTerminal reproduces issue 34 item B7 for `caddy hooks
// tail --json`: a refused request's hook name, chosen by the sender,
// reached the terminal with its C1 controls and bidi characters raw (Go's
// encoder escapes only C0). Now the line is the same JSON with those
// written as \uXXXX escapes: it parses back to the hook name as sent.
func TestTailJSONFitForTerminal(t *testing.T) {
	in, adm := startOpsIngress(t, ingressOpts{})
	root := &cobra.Command{Use: "hooks", SilenceUsage: true}
	root.AddCommand(hooksSubcommands()...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"tail", "--address", "unix/" + adm.sock, "--json", "--status", "rejected", "--count", "1"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	testkit.WaitForState(t, func() string { return "the tail did not connect" }, func() bool {
		lh := liveHandlers()
		return len(lh) == 1 && lh[0].view.events.eventLog().Subscribers() >= 1
	})
	hook := "evil" + terminalHostile
	in.post("/hooks/"+pathEscapeAll(hook), `{}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(out.String())
	t.Logf("caddy hooks tail --json: %s", line)
	if rawHostile(line) || !strings.Contains(line, `\u009b`) || !strings.Contains(line, `\u202e`) {
		t.Fatalf("a control or bidi character reached the terminal raw: %q", line)
	}
	var row struct{ Hook string }
	if err := json.Unmarshal([]byte(line), &row); err != nil || row.Hook != hook {
		t.Fatalf("the line reads back as %q (%v), want the hook name as sent, %q", row.Hook, err, hook)
	}
}

// pathEscapeAll percent-encodes every byte of s that is not ASCII.
func pathEscapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x80 {
			b.WriteByte(c)
		} else {
			b.WriteString(fmt.Sprintf("%%%02X", c))
		}
	}
	return b.String()
}

// TestDryRunFitForTerminal reproduces issue 34 item B7 for `caddy hooks
// test`: the report printed what a sender chose (a body as forwarded, a
// payload field in a rendered template) with C1 controls and bidi
// characters raw. Now it is the same JSON with those escaped: it reads
// back the same.
func TestDryRunFitForTerminal(t *testing.T) {
	t.Setenv("CADDYHOOK_DRY_TOKEN", dryToken)
	t.Setenv("CADDYHOOK_DRY_SECRET", drySecret)
	dir := t.TempDir()
	for _, tc := range []struct{ caddyfile, path, field, payload, want string }{
		{dryRunForwardCaddyfile, "wake", "text", `{"text":"deploy` + terminalHostile + `"}`, "deploy" + terminalHostile},
		{dryRunCaddyfile, "alert", "text", `{"name":"db` + terminalHostile + `","status":"down"}`, "db" + terminalHostile + " is down (alert)"},
	} {
		cfg, payload := filepath.Join(dir, "Caddyfile"), filepath.Join(dir, "payload.json")
		for p, b := range map[string]string{cfg: tc.caddyfile, payload: tc.payload} {
			if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var out, notes bytes.Buffer
		if _, err := runDryRun(&out, &notes, dryRunOptions{config: cfg, path: tc.path, payload: payload}); err != nil {
			t.Fatal(err)
		}
		t.Logf("caddy hooks test --path %s:\n%s", tc.path, out.String())
		if rawHostile(out.String()) {
			t.Fatalf("a control or bidi character reached the terminal raw: %q", out.String())
		}
		var rep dryRunReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Actions) != 1 {
			t.Fatalf("%v, %d actions", err, len(rep.Actions))
		}
		var b map[string]any
		_ = json.Unmarshal(rep.Actions[0].Body, &b)
		if got, _ := b[tc.field].(string); got != tc.want {
			t.Fatalf("the report reads back as %q, want %q", got, tc.want)
		}
	}
}
