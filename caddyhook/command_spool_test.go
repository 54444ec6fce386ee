package caddyhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// refusingSender answers every delivery with a permanent gateway 400, so
// each event becomes a dead letter.
type refusingSender struct{}

// Send implements spool.Sender.
func (refusingSender) Send(context.Context, *spool.Event) (int, string, error) {
	return 400, `{"ok":false,"error":"channel and to must be set together for hook delivery"}`, nil
}

// cliCanary marks spooled bodies; it must only be printed with --body.
const cliCanary = "BODY-CANARY-51d0"

// seedSpool creates a spool in dir holding the dead letters deadIDs and
// queued undelivered events, and closes it.
func seedSpool(t *testing.T, dir string, deadIDs []string, queued int) {
	t.Helper()
	st, err := spool.Open(spool.Config{Dir: dir, RetryInitial: time.Millisecond, RetryMax: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	event := func(id string) *spool.Event {
		return &spool.Event{ID: id, Kind: spool.KindAgent, Path: "/hooks/agent",
			Body: fmt.Appendf(nil, `{"message":"%s %s"}`, cliCanary, id)}
	}
	for _, id := range deadIDs {
		if err := st.Append(context.Background(), event(id)); err != nil {
			t.Fatal(err)
		}
	}
	st.SetSender(refusingSender{})
	waitFor(t, func() string { return fmt.Sprintf("seeding: %d of %d dead letters", st.Stats().Dead, len(deadIDs)) },
		func() bool { return st.Stats().Dead >= len(deadIDs) })
	st.SetSender(nil)
	for i := range queued {
		if err := st.Append(context.Background(), event(fmt.Sprintf("queued-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// spoolState reopens the spool in dir and returns its dead-letter ids and
// queue depth.
func spoolState(t *testing.T, dir string) (dead []string, queued int) {
	t.Helper()
	st, err := spool.Open(spool.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.DeadLetters()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		dead = append(dead, ev.ID)
	}
	return dead, st.Stats().Depth
}

// runHooksCommand runs `caddy hooks <args>` as the CLI would (through
// hooksSubcommands) and returns stdout, stderr and the error that makes
// caddycmd.Main exit with status 1.
func runHooksCommand(args ...string) (string, string, error) {
	root := &cobra.Command{Use: "hooks", SilenceUsage: true}
	root.AddCommand(hooksSubcommands()...)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestSpoolCommand(t *testing.T) {
	const esc = "evil-\x1b[2J"
	seeded := []string{"d-1", "d-2", esc}
	cases := []struct {
		name       string
		args       []string // after "spool <sub>", before --dir
		wantErr    bool
		wantOut    []string
		notOut     []string
		wantStderr string
		wantDead   []string
		wantQueued int
	}{
		{name: "list", args: []string{"list"},
			wantOut: []string{"2 queued for delivery, 3 dead letter(s)", "ID", "LAST ERROR", "d-1", "d-2", `"evil-\x1b[2J"`,
				"agent", "gateway status 400: {\"ok\":false,\"error\":\"channel and to must be set together", "B "},
			notOut: []string{cliCanary, "\x1b"}, wantDead: seeded, wantQueued: 2},
		{name: "list with body", args: []string{"list", "--body", "d-2"},
			wantOut: []string{"--- d-2 (", cliCanary + " d-2"}, notOut: []string{"d-1", cliCanary + " d-1"},
			wantDead: seeded, wantQueued: 2},
		{name: "list unknown id", args: []string{"list", "nope"}, wantErr: true,
			wantStderr: `no dead letter with id "nope"`, wantDead: seeded, wantQueued: 2},
		{name: "retry one", args: []string{"retry", "d-2"},
			wantOut: []string{"requeued 1 dead letter(s)"}, wantDead: []string{"d-1", esc}, wantQueued: 3},
		{name: "retry unknown requeues nothing", args: []string{"retry", "nope"}, wantErr: true,
			wantOut: []string{"requeued 0 dead letter(s)"}, wantStderr: `no dead letter with id "nope"`, wantDead: seeded, wantQueued: 2},
		{name: "retry known and unknown", args: []string{"retry", "d-1", "nope"}, wantErr: true,
			wantOut: []string{"requeued 1 dead letter(s)"}, wantDead: []string{"d-2", esc}, wantQueued: 3},
		{name: "retry all", args: []string{"retry"},
			wantOut: []string{"requeued 3 dead letter(s)"}, wantQueued: 5},
		{name: "drop needs ids or --all", args: []string{"drop"}, wantErr: true,
			wantStderr: "--all", wantDead: seeded, wantQueued: 2},
		{name: "drop refuses ids with --all", args: []string{"drop", "--all", "d-1"}, wantErr: true,
			wantStderr: "not both", wantDead: seeded, wantQueued: 2},
		{name: "drop one", args: []string{"drop", esc},
			wantOut: []string{"dropped 1 dead letter(s)"}, wantDead: []string{"d-1", "d-2"}, wantQueued: 2},
		{name: "drop unknown drops nothing", args: []string{"drop", "nope"}, wantErr: true,
			wantOut: []string{"dropped 0 dead letter(s)"}, wantDead: seeded, wantQueued: 2},
		{name: "drop all", args: []string{"drop", "--all"},
			wantOut: []string{"dropped 3 dead letter(s)"}, wantQueued: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			seedSpool(t, dir, seeded, 2)
			args := append([]string{"spool"}, c.args...)
			out, errOut, err := runHooksCommand(append(args, "--dir", dir)...)
			if (err != nil) != c.wantErr {
				t.Fatalf("error = %v, want error %v; stdout:\n%s\nstderr:\n%s", err, c.wantErr, out, errOut)
			}
			for _, w := range c.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.notOut {
				if strings.Contains(out, w) {
					t.Errorf("stdout contains %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, c.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", c.wantStderr, errOut)
			}
			dead, queued := spoolState(t, dir)
			if !slices.Equal(dead, c.wantDead) || queued != c.wantQueued {
				t.Errorf("after the command: dead %q, queued %d; want dead %q, queued %d", dead, queued, c.wantDead, c.wantQueued)
			}
		})
	}
}

func TestSpoolCommandRefusals(t *testing.T) {
	held := t.TempDir()
	st, err := spool.Open(spool.Config{Dir: held}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	empty := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"locked by a running instance", []string{"spool", "list", "--dir", held},
			"spool " + held + " is in use by a running caddyhook (pid unknown); stop it first or inspect via its metrics"},
		{"locked, retry", []string{"spool", "retry", "--dir", held}, "is in use by a running caddyhook"},
		{"locked, drop", []string{"spool", "drop", "--all", "--dir", held}, "is in use by a running caddyhook"},
		{"no spool there", []string{"spool", "list", "--dir", empty}, "no spool in " + empty + ": spool.db does not exist"},
		{"no dir", []string{"spool", "list"}, "--dir is required"},
		{"unknown subcommand", []string{"spool", "purge", "--dir", held}, `unknown spool command "purge"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, errOut, err := runHooksCommand(c.args...)
			if err == nil || !strings.Contains(errOut+err.Error(), c.want) {
				t.Fatalf("error %v, stderr %q; want an error saying %q", err, errOut, c.want)
			}
			if d := time.Since(start); d > hangBound {
				t.Fatalf("took %s to give up (lock timeout %s)", d, spoolCLILockTimeout)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(empty, spool.DBFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused command created a spool in %s (stat: %v)", empty, err)
	}
}
