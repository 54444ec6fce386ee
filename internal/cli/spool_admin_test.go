package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// TestPickSpooled: which running handler's spool a spool command works on.
func TestPickSpooled(t *testing.T) {
	a := adminapi.HandlerStatus{Path: "/a", Spool: &adminapi.Spool{Dir: "/var/spool/a"}}
	b := adminapi.HandlerStatus{Path: "/b", Spool: &adminapi.Spool{Dir: "/var/spool/b"}}
	none := adminapi.HandlerStatus{Path: "/n"}
	tests := []struct {
		name      string
		handlers  []adminapi.HandlerStatus
		dir, path string
		want      string // base path picked; "" = none (use the file)
		wantErr   string
	}{
		{"only spool", []adminapi.HandlerStatus{none, a}, "", "", "/a", ""},
		{"by dir", []adminapi.HandlerStatus{a, b}, "/var/spool/b", "", "/b", ""},
		{"dir not running: the file", []adminapi.HandlerStatus{a, b}, "/var/spool/c", "", "", ""},
		{"by path", []adminapi.HandlerStatus{a, b}, "", "/b/", "/b", ""},
		{"path without spool", []adminapi.HandlerStatus{a, none}, "", "/n", "", "no hooks handler with a spool at --base /n"},
		{"several", []adminapi.HandlerStatus{a, b}, "", "", "", "several spools; choose one with --base or --dir"},
		{"no spool at all", []adminapi.HandlerStatus{none}, "", "", "", "has no hooks handler with a spool"},
	}
	for _, tt := range tests {
		c := &spoolCLI{admin: "localhost:2019"}
		h, err := c.pickSpooled(tt.handlers, tt.dir, tt.path)
		got := ""
		if h != nil {
			got = h.Path
		}
		if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: picked %q, error %v; want %q, error %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestSpoolStatus: `caddy hooks spool status` through a running Caddy
// prints the queue, whether delivery runs (the summary, never "running"
// unless the admin API says so) and each delivery node, with what a
// sender put in an error made one line; without a running Caddy it says
// that nothing delivers the spool file.
func TestSpoolStatus(t *testing.T) {
	now := time.Now()
	delivery := adminapi.Delivery{
		Queue:   adminapi.DeliveryQueue{Depth: 3, OldestAgeSeconds: 41},
		Summary: cluster.DeliverySummary{State: cluster.DeliveryStalled, Text: "delivery stalled: none of 1 delivery nodes makes progress; 3 queued, oldest 41s"},
		Nodes: []cluster.NodeDelivery{{Node: "d1-host", State: cluster.DeliveryStalled, Heard: now.Add(-38 * time.Second),
			Note: "not heard from for 38s, 3 events queued", DeliveryFacts: cluster.DeliveryFacts{Delivers: true,
				LastSuccess: now.Add(-47 * time.Second), LastError: "gateway status 502:\x1b[31m bad", LastErrorAt: now.Add(-40 * time.Second)}}},
		Asked: adminapi.Nodes{Asked: 3, Answered: []string{"e1", "e2"}, Missing: []adminapi.MissingNode{{Node: "d1-host", Why: "did not answer within 1s"}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/hooks/":
			_ = json.NewEncoder(w).Encode([]adminapi.HandlerStatus{{Path: "/hooks",
				Spool: &adminapi.Spool{Dir: "cluster:hooks", Depth: 3, OldestAgeSeconds: 41}}})
		case "/hooks/spool/delivery":
			_ = json.NewEncoder(w).Encode(delivery)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cmd := newSpoolCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"status", "--address", strings.TrimPrefix(srv.URL, "http://")})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	text := out.String()
	for _, want := range []string{"spool cluster:hooks: 3 queued (oldest 41s), 0 dead letter(s)",
		"delivery stalled: none of 1 delivery nodes makes progress", "nodes: 2 of 3 nodes answered; d1-host did not answer within 1s",
		"d1-host", "stalled", "47s ago", "gateway status 502: [31m bad", "not heard from for 38s"} {
		if !strings.Contains(text, want) {
			t.Errorf("the status lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") || strings.Contains(text, "running") {
		t.Errorf("a control character, or running while stalled:\n%q", text)
	}

	// no Caddy: the spool file, and nothing delivers it
	dir := t.TempDir()
	st, err := spool.Open(spool.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	srv.Close()
	out.Reset()
	cmd = newSpoolCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"status", "--address", strings.TrimPrefix(srv.URL, "http://"), "--dir", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "0 queued, 0 dead letter(s)") || !strings.Contains(out.String(), "nothing delivers it now") {
		t.Errorf("offline status:\n%s", out.String())
	}
}
