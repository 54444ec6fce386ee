package spool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/caddyhook/caddyhook/internal/golden"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// goldenBuilds are the builds whose spool.db this release promises to
// read, earliest first: 43fd7c0 (before signing_key) and 453004b (the
// last build before versions).
var goldenBuilds = []string{"43fd7c0", "453004b"}

// goldenDiffers is what the two builds wrote differently: 43fd7c0 kept
// no client address with a spooled event, and kept a forwarded request's
// headers as it sent them to the gateway (its credentials and transport
// headers included: today's sender replaces Authorization with its own
// gateway_token) without the path below the gateway prefix; 453004b kept
// the sender's headers as sent (Host included) and that path.
var goldenDiffers = map[string]struct {
	clientIP string
	header   map[string]string // the forwarded request's, every one ("" value: any)
	below    string
}{
	"43fd7c0": {"", map[string]string{"Accept-Encoding": "gzip", "Authorization": "Bearer golden-gateway-token-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c",
		"Content-Type": "application/json", "Idempotency-Key": "golden-forward-key", "User-Agent": "Go-http-client/1.1",
		"X-Golden": "forwarded header"}, ""},
	"453004b": {"127.0.0.1", map[string]string{"Accept-Encoding": "gzip", "Content-Type": "application/json", "Host": "",
		"Idempotency-Key": "golden-forward-key", "User-Agent": "Go-http-client/1.1", "X-Golden": "forwarded header"}, "/fwd?golden=1"},
}

// TestGoldenSpoolFiles: the spool.db of each earlier build opens with
// today's code, and every field of every record reads as that build wrote
// it. The file holds (internal/goldengen): a dead letter of record
// version 1 (a rendered wake the gateway refused with 400), and two events
// queued after one failed attempt (503), of record version 2: a rendered
// agent run with its trace context, and a forwarded request with its
// headers and the path below the gateway prefix.
func TestGoldenSpoolFiles(t *testing.T) {
	for _, build := range goldenBuilds {
		t.Run(build, func(t *testing.T) {
			src := filepath.Join("testdata", "golden", build)
			m, err := golden.ReadManifest(src)
			if err != nil {
				t.Fatal(err)
			}
			want := goldenDiffers[build]
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join(src, DBFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, DBFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(Config{Dir: dir}, nil)
			if err != nil {
				t.Fatalf("today's Open of the %s spool.db: %v", build, err)
			}
			defer s.Close()
			if n := s.Newer(); len(n) != 0 {
				t.Errorf("records taken for a newer release's: %v", n)
			}
			if st := s.Stats(); st.Depth != 2 || st.Dead != 1 {
				t.Errorf("stats: depth %d, dead %d; want 2 queued, 1 dead", st.Depth, st.Dead)
			}
			inWindow := func(what string, at time.Time) {
				t.Helper()
				if at.Before(m.Start) || at.After(m.End) {
					t.Errorf("%s %v outside the run (%v to %v)", what, at, m.Start, m.End)
				}
			}

			// the dead letter: record version 1, every field
			dead, err := s.DeadLetters()
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters %v, %v", dead, err)
			}
			d := dead[0]
			wake := m.Request("spool-dead-wake")
			if d.ID == "" || d.Kind != KindWake || d.Path != wake.Path || string(d.Body) != wake.Body || d.ClientIP != want.clientIP ||
				d.Attempts != 1 || d.LastError != `gateway status 400: {"ok":false,"error":"refused for the golden fixture"}` ||
				!d.NextTry.IsZero() || d.TraceParent != "" || d.TraceState != "" || d.Header != nil || d.PathBelowPrefix != "" || d.Seq == 0 {
				t.Errorf("dead letter: %+v", d)
			}
			inWindow("dead letter first seen", d.FirstSeen)

			// the queued events: record version 2, every field
			queued := map[string]*Event{}
			versions := map[string]byte{}
			err = s.db.View(func(tx *bolt.Tx) error {
				return tx.Bucket(queueBucket).ForEach(func(k, v []byte) error {
					ev, err := decodeEvent(v)
					if err != nil {
						return err
					}
					ev.Seq = keySeq(k)
					queued[ev.ID] = ev
					versions[ev.ID] = v[0]
					return nil
				})
			})
			if err != nil || len(queued) != 2 {
				t.Fatalf("queued %v, %v", queued, err)
			}
			agent, fwd := m.Request("spool-queued-agent"), m.Request("spool-queued-forward")
			a, f := queued[agent.EventID], queued[fwd.EventID]
			if a == nil || f == nil {
				t.Fatalf("queued ids %v, want %s and %s", queued, agent.EventID, fwd.EventID)
			}
			for id, v := range versions {
				if v != codecVersionV2 {
					t.Errorf("%s: record version %d, want 2", id, v)
				}
			}
			var body struct{ Message, Name, SessionKey string }
			if err := json.Unmarshal(a.Body, &body); err != nil || body.Message != "golden agent please-retry" || body.Name != "Golden" ||
				!strings.HasPrefix(body.SessionKey, "hook:") {
				t.Errorf("agent body %s (%v)", a.Body, err)
			}
			if a.Kind != KindAgent || a.Path != "/hooks/agent" || a.ClientIP != want.clientIP || a.Attempts != 1 ||
				!strings.HasPrefix(a.LastError, "gateway status 503") || a.TraceParent != agent.Header["Traceparent"] ||
				a.TraceState != agent.Header["Tracestate"] || a.Header != nil || a.PathBelowPrefix != "" {
				t.Errorf("queued agent run: %+v", a)
			}
			if len(f.Header) != len(want.header) {
				t.Errorf("forwarded headers %v, want %v", f.Header, want.header)
			}
			for k, v := range want.header {
				if got := f.Header[k]; len(got) != 1 || v != "" && got[0] != v {
					t.Errorf("forwarded header %s: %q, want %q", k, got, v)
				}
			}
			if f.Kind != KindAgent || f.Path != fwd.Path || f.PathBelowPrefix != want.below || string(f.Body) != fwd.Body ||
				f.ClientIP != want.clientIP || f.Attempts != 1 || !strings.HasPrefix(f.LastError, "gateway status 503") ||
				f.TraceParent != "" || f.TraceState != "" {
				t.Errorf("queued forwarded request: %+v", f)
			}
			for _, ev := range []*Event{a, f} {
				inWindow(ev.ID+" first seen", ev.FirstSeen)
				// retry_initial 1h ± 20 % jitter after the attempt
				if wait := ev.NextTry.Sub(ev.FirstSeen); wait < 47*time.Minute || wait > 73*time.Minute {
					t.Errorf("%s: next try %s after first seen, want about an hour", ev.ID, wait)
				}
			}

			// and today's code delivers what the old build queued
			snd := &fakeSender{}
			s.SetSender(snd)
			if n, err := s.Retry(); n != 1 || err != nil {
				t.Fatalf("retry the dead letter: %d, %v", n, err)
			}
			testkit.WaitFor(t, "the old dead letter delivered", func() bool { return len(snd.delivered(KindWake)) == 1 })
			if got := string(snd.body[d.ID]); got != wake.Body {
				t.Errorf("delivered %q, want %q", got, wake.Body)
			}
		})
	}
}
