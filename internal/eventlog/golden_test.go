package eventlog

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/golden"
)

// TestGoldenEventsFile: the events.db that 453004b wrote (the format of
// every build since the event log exists: rows without "v", version 0;
// see internal/goldengen for how it was made) opens with today's code,
// and every field of each of its three events reads as that build wrote
// it: a wake the gateway refused (dead), an agent run and a forwarded
// request queued after a 503 (retrying), with their headers (names, and
// the allow-listed values), bodies, replay data and dispatch outcomes.
// The file is read as of the end of the run that wrote it (the log's
// retention counts from then).
func TestGoldenEventsFile(t *testing.T) {
	src := filepath.Join("testdata", "golden", "453004b")
	m, err := golden.ReadManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := os.ReadFile(filepath.Join(src, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, storeFile), db, 0o600); err != nil {
		t.Fatal(err)
	}
	st, loaded, err := openStore(dir, Bounds{}.withDefaults(), m.End, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if len(st.newer) != 0 || st.maxSeq != 3 || len(loaded) != 3 {
		t.Fatalf("loaded %d events (newer %v, highest key %d); want 3", len(loaded), st.newer, st.maxSeq)
	}
	client := netip.MustParseAddr("127.0.0.1")
	hdr := func(pairs ...string) []Header { // name, value ("" hidden)
		var out []Header
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, Header{Name: pairs[i], Value: pairs[i+1], Shown: pairs[i+1] != ""})
		}
		return out
	}
	for i, tc := range []struct {
		req, hook, route, mapping, state string
		status                           int
		errText, idem                    string
		headers                          []Header
		replay                           string // what the kept replay data says (parsed), in part
	}{
		{"spool-dead-wake", "wake", "wake", "", StateDead, 400, `gateway status 400: {"ok":false,"error":"refused for the golden fixture"}`, "",
			hdr("Accept-Encoding", "", "User-Agent", "Go-http-client/1.1", "Content-Length", "47", "Authorization", "", "Content-Type", "application/json"),
			`"kind":"wake","mode":"now"`},
		{"spool-queued-agent", "agent", "agent", "", StateRetrying, 503, `gateway status 503: {"ok":false,"error":"busy"}`, "",
			hdr("User-Agent", "Go-http-client/1.1", "Content-Length", "55", "Authorization", "", "Content-Type", "application/json",
				"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Tracestate", "", "Accept-Encoding", ""),
			`"kind":"agent"`},
		{"spool-queued-forward", "fwd", "fwd", "fwd", StateRetrying, 503, `gateway status 503: {"ok":false,"error":"busy"}`, "golden-forward-key",
			hdr("Content-Length", "33", "Authorization", "", "Content-Type", "application/json", "Idempotency-Key", "golden-forward-key",
				"X-Golden", "", "Accept-Encoding", "", "User-Agent", "Go-http-client/1.1"),
			`"kind":"agent","path":"/hooks/fwd?golden=1"`},
	} {
		e := loaded[i]
		r := m.Request(tc.req)
		id := r.EventID
		if id == "" {
			id = e.ID // the wake's answer names no id: its event and action share one
		}
		if e.Seq != uint64(i+1) || e.ID != id || e.Path != "/hooks" || e.Hook != tc.hook || e.Route != tc.route || e.Mapping != tc.mapping ||
			e.Client != client || e.ClientBits != 0 || e.Auth != "token" || e.Status != 200 || e.Reason != "" || e.Latency <= 0 ||
			e.IdemKey != tc.idem || e.ReplayOf != "" || string(e.Body) != r.Body || e.BodyBytes != len(r.Body) || e.BodyNote != "" ||
			e.ReplayNote != "" || !e.Tracked {
			t.Errorf("%s: %+v", tc.req, e)
		}
		if e.Time.Before(m.Start) || e.Time.After(m.End) {
			t.Errorf("%s: time %v outside the run", tc.req, e.Time)
		}
		if !reflect.DeepEqual(e.Headers, tc.headers) {
			t.Errorf("%s: headers\n %+v\nwant\n %+v", tc.req, e.Headers, tc.headers)
		}
		var replay []map[string]any
		if err := json.Unmarshal(e.Replay, &replay); err != nil || len(replay) != 1 || !strings.Contains(string(e.Replay), tc.replay) ||
			replay[0]["client_ip"] != "127.0.0.1" {
			t.Errorf("%s: replay data %s (%v)", tc.req, e.Replay, err)
		}
		if len(e.Dispatch) != 1 {
			t.Fatalf("%s: dispatch %+v", tc.req, e.Dispatch)
		}
		d := e.Dispatch[0]
		kind := "agent"
		if tc.hook == "wake" {
			kind = "wake"
		}
		if d.ID != e.ID || d.Kind != kind || d.State != tc.state || d.GatewayStatus != tc.status || d.RunID != "" || d.Attempts != 1 ||
			d.Error != tc.errText || d.Node != "" || d.Updated.Before(e.Time) || d.Updated.After(m.End) {
			t.Errorf("%s: dispatch %+v", tc.req, d)
		}
	}
}
