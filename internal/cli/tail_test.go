package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// fakeEventsAdmin is a stand-in admin API: the events page (the backlog)
// and one stream that sends its messages and ends.
func fakeEventsAdmin(t *testing.T, page string, stream ...string) (*httptest.Server, *[]string) {
	t.Helper()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery+" last="+r.Header.Get("Last-Event-ID"))
		switch r.URL.Path {
		case "/hooks/events":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, page)
		case "/hooks/events/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			for _, m := range stream {
				fmt.Fprint(w, m)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

// tailFlags are `caddy hooks tail`'s flags, set to args.
func tailFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fl := newTailCommand().Flags()
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fl
}

// TestTailPrints: the backlog (oldest first) then the stream's entries are
// printed one per line, --count lines in all; the filters go to the admin
// API; a sender's control characters never reach the terminal.
func TestTailPrints(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(id, hook, reason string) string {
		b, err := json.Marshal(map[string]any{"type": "event", "id": id, "time": at, "hook": hook, "status": 401,
			"state": "rejected", "reason": reason, "client": "192.0.2.1"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	page := `{"entries":[` + ev("e2", "second", "") + `,` + ev("e1", "first", "") + `]}`
	srv, asked := fakeEventsAdmin(t, page,
		"retry: 2000\n: hooks events\n\n",
		"event: event\nid: 7\ndata: "+ev("e3", "live\x1b[31m", "bad\ntoken")+"\n\n",
		"event: event\nid: 8\ndata: "+ev("e4", "after-count", "")+"\n\n")
	var out bytes.Buffer
	fl := tailFlags(t, "--address", strings.TrimPrefix(srv.URL, "http://"), "--since", "10m", "--count", "3", "--hook", "first", "--status", "4xx")
	if err := runTail(context.Background(), fl, &out, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "first") || !strings.Contains(lines[1], "second") || !strings.Contains(lines[2], "live") {
		t.Fatalf("printed:\n%s", out.String())
	}
	if strings.ContainsAny(out.String(), "\x1b") || strings.Contains(lines[2], "bad\ntoken") {
		t.Fatalf("a control character reached the output: %q", lines[2])
	}
	if len(*asked) < 2 || !strings.Contains((*asked)[0], "since=10m") || !strings.Contains((*asked)[0], "hook=first") ||
		!strings.Contains((*asked)[1], "status=4xx") || strings.Contains((*asked)[1], "since=") {
		t.Fatalf("requests %q", *asked)
	}
}

// TestTailJSONAndLost: --json prints each entry as the API sent it; a
// "lost" message is a note; the stream resumes from the last id.
func TestTailJSONAndLost(t *testing.T) {
	row := `{"client":"192.0.2.9","status":429,"reason":"locked out","count":3}`
	srv, _ := fakeEventsAdmin(t, `{"entries":[]}`, "event: lost\ndata: {}\n\n", "event: rejections\ndata: "+row+"\n\n")
	var out bytes.Buffer
	fl := tailFlags(t, "--address", strings.TrimPrefix(srv.URL, "http://"), "--json", "--count", "2")
	if err := runTail(context.Background(), fl, &out, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	want := "(the tail fell behind: some changes were not shown)\n" + row + "\n"
	if out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}

// TestTailUnreachable: nothing at the address is a clear error.
func TestTailUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	err := runTail(context.Background(), tailFlags(t, "--address", addr), new(bytes.Buffer), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "no Caddy admin API answers at "+addr) {
		t.Fatalf("%v", err)
	}
}

// TestTailLine: an event and a rejection row as one line each.
func TestTailLine(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	ev := fmt.Sprintf(`{"time":%q,"hook":"wake","status":200,"state":"sent","latency_ms":1.25,"client":"192.0.2.1","run_id":"r1"}`, at.Format(time.RFC3339))
	if got := tailLine("event", []byte(ev), false); !strings.Contains(got, "12:00:00") || !strings.Contains(got, "wake") ||
		!strings.Contains(got, "200") || !strings.Contains(got, "run=r1") {
		t.Errorf("event line %q", got)
	}
	if got := tailLine("event", []byte("{"), false); got != "(unreadable event)" {
		t.Errorf("bad event: %q", got)
	}
	var r eventlog.RejectionJSON
	r.Status, r.Count, r.Reason = 401, 4, "invalid or missing token"
	if got := tailLine("rejections", []byte(`{"status":401,"count":4,"reason":"invalid or missing token","client":"192.0.2.1"}`), false); !strings.Contains(got, "refused") ||
		!strings.Contains(got, "(×4 this minute)") || !strings.Contains(got, r.Reason) {
		t.Errorf("rejection line %q", got)
	}
}

// TestTailCluster: --cluster asks every node (scope=cluster), each line
// names its node, and a node that stops answering is named once, as is
// its return.
func TestTailCluster(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := func(node, hook string) string {
		return fmt.Sprintf(`{"type":"event","id":"x","time":%q,"hook":%q,"status":200,"state":"queued","client":"192.0.2.1","node":%q}`,
			at.Format(time.RFC3339), hook, node)
	}
	all := `{"asked":3,"answered":["e1","e2","d1"]}`
	oneGone := `{"asked":3,"answered":["e1","d1"],"missing":[{"node":"e2\u001b[31m","why":"did not answer within 2s"}]}`
	srv, asked := fakeEventsAdmin(t, `{"entries":[]}`,
		"event: nodes\ndata: "+all+"\n\n",
		"event: event\ndata: "+ev("e1", "one")+"\n\n",
		"event: event\ndata: "+ev("e2", "two")+"\n\n",
		"event: nodes\ndata: "+oneGone+"\n\n",
		"event: nodes\ndata: "+oneGone+"\n\n", // the same: not printed again
		"event: event\ndata: "+ev("e1", "three")+"\n\n",
		"event: nodes\ndata: "+all+"\n\n")
	var out bytes.Buffer
	fl := tailFlags(t, "--address", strings.TrimPrefix(srv.URL, "http://"), "--cluster", "--count", "6")
	if err := runTail(context.Background(), fl, &out, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("printed %d lines:\n%s", len(lines), out.String())
	}
	for i, want := range []string{"all 3 nodes answer", "e1", "e2", "2 of 3 nodes answer; node e2 [31m did not answer within 2s; following the others", "e1", "all 3 nodes answer"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q, want %q", i, lines[i], want)
		}
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Errorf("a control character reached the output")
	}
	if !strings.Contains((*asked)[0], "scope=cluster") {
		t.Errorf("requests %q, want scope=cluster", *asked)
	}
}

// TestTailReconnects: a stream that ends is reconnected, and the tail
// says so on stderr (and when it is back); an endpoint that stays away
// is given up, naming it, with an error (exit status 1).
func TestTailReconnects(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: event\ndata: {\"type\":\"event\",\"time\":%q,\"hook\":\"h%d\",\"status\":200}\n\n", at.Format(time.RFC3339), k)
	}))
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out, notes bytes.Buffer
	if err := runTail(context.Background(), tailFlags(t, "--address", addr, "--count", "2"), &out, &notes); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notes.String(), "(the stream from the admin API at "+addr+" stopped") ||
		!strings.Contains(notes.String(), "(reconnected to the admin API at "+addr) {
		t.Errorf("notes %q", notes.String())
	}
	if !strings.Contains(out.String(), "h1") || !strings.Contains(out.String(), "h2") {
		t.Errorf("printed %q", out.String())
	}

	// the endpoint goes away for good after one stream: given up after
	// --reconnect, naming it
	srv.Close()
	served := make(chan struct{})
	var once sync.Once
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": hooks events\n\n")
		once.Do(func() { close(served) })
	}))
	addr2 := strings.TrimPrefix(srv2.URL, "http://")
	go func() { <-served; srv2.Close() }()
	notes.Reset()
	err := runTail(context.Background(), tailFlags(t, "--address", addr2, "--reconnect", "1500ms"), new(bytes.Buffer), &notes)
	if err == nil || !strings.Contains(err.Error(), "gave up on the admin API at "+addr2) {
		t.Fatalf("error %v, want it to give up naming %s", err, addr2)
	}
	if !strings.Contains(notes.String(), "reconnecting for up to 1.5s") {
		t.Errorf("notes %q", notes.String())
	}
}
