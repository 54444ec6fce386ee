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
	"github.com/caddyhook/caddyhook/internal/testkit"
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
	testkit.WaitForState(t, func() string { return fmt.Sprintf("seeding: %d of %d dead letters", st.Stats().Dead, len(deadIDs)) },
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

// noAdmin is an --address where no admin API answers, so that a spool
// command works on the file and never asks whatever listens on the
// default localhost:2019.
func noAdmin(t *testing.T) string {
	return "unix/" + filepath.Join(t.TempDir(), "no-admin.sock")
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
			out, errOut, err := runHooksCommand(append(args, "--dir", dir, "--address", noAdmin(t))...)
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
			"spool " + held + " is in use by a running caddyhook, and no hooks handler of a Caddy admin API at unix/"},
		{"locked, retry", []string{"spool", "retry", "--dir", held}, "is in use by a running caddyhook"},
		{"locked, drop", []string{"spool", "drop", "--all", "--dir", held}, "is in use by a running caddyhook"},
		{"no spool there", []string{"spool", "list", "--dir", empty}, "no spool in " + empty + ": spool.db does not exist"},
		{"no dir", []string{"spool", "list"}, "--dir is required"},
		{"unknown subcommand", []string{"spool", "purge", "--dir", held}, `unknown spool command "purge"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, errOut, err := runHooksCommand(append(c.args, "--address", noAdmin(t))...)
			if err == nil || !strings.Contains(errOut+err.Error(), c.want) {
				t.Fatalf("error %v, stderr %q; want an error saying %q", err, errOut, c.want)
			}
			if d := time.Since(start); d > hangBound {
				t.Fatalf("took %s to give up (the spool commands wait 500ms for the lock)", d)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(empty, spool.DBFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused command created a spool in %s (stat: %v)", empty, err)
	}
}

// truncateSpool cuts the spool file in dir just short of its last page in
// use (the high-water mark of meta page 0), so that bbolt would fault on
// it, and returns the damaged bytes.
func truncateSpool(t *testing.T, dir string) []byte {
	t.Helper()
	path := filepath.Join(dir, spool.DBFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(b[24]) | int(b[25])<<8 | int(b[26])<<16
	hwm := int(b[56]) | int(b[57])<<8
	b = b[:(hwm-1)*pageSize+pageSize/3]
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpoolCommandCorruptFile: list, retry and drop report a corrupt
// spool file (and what to do) instead of panicking or dying of SIGBUS,
// changing nothing; salvage moves it aside, restores what it can read and
// leaves a spool the other commands use again.
func TestSpoolCommandCorruptFile(t *testing.T) {
	dir := t.TempDir()
	seedSpool(t, dir, []string{"d-1", "d-2"}, 3)
	damaged := truncateSpool(t, dir)
	for _, sub := range [][]string{{"list"}, {"retry"}, {"drop", "--all"}} {
		_, errOut, err := runHooksCommand(append([]string{"spool"}, append(sub, "--dir", dir, "--address", noAdmin(t))...)...)
		if err == nil || !strings.Contains(errOut, "is corrupt: truncated") ||
			!strings.Contains(errOut, "caddy hooks spool salvage --dir "+dir) {
			t.Fatalf("spool %s: error %v, stderr %q; want a corruption report naming salvage", sub[0], err, errOut)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, spool.DBFile)); !bytes.Equal(got, damaged) {
		t.Fatal("a refused command changed the corrupt file")
	}

	out, errOut, err := runHooksCommand("spool", "salvage", "--dir", dir)
	if err != nil {
		t.Fatalf("salvage: %v (%s)", err, errOut)
	}
	moved, _ := filepath.Glob(filepath.Join(dir, spool.DBFile+".corrupt-*"))
	if len(moved) != 1 || !strings.Contains(out, "was corrupt: truncated") || !strings.Contains(out, "moved it to "+moved[0]) {
		t.Fatalf("salvage output %q, moved files %v", out, moved)
	}
	if got, _ := os.ReadFile(moved[0]); !bytes.Equal(got, damaged) {
		t.Fatal("the moved file differs from the corrupt one")
	}
	dead, queued := spoolState(t, dir)
	if want := fmt.Sprintf("restored %d queued event(s) and %d dead letter(s)", queued, len(dead)); !strings.Contains(out, want) {
		t.Fatalf("salvage output %q does not say %q", out, want)
	}
	if _, errOut, err := runHooksCommand("spool", "list", "--dir", dir, "--address", noAdmin(t)); err != nil {
		t.Fatalf("list after salvage: %v (%s)", err, errOut)
	}
	if out, _, err := runHooksCommand("spool", "salvage", "--dir", dir); err != nil || !strings.Contains(out, "is sound") {
		t.Fatalf("second salvage: %v, %q", err, out)
	}
}
