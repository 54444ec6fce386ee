package natscluster

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/golden"
)

// goldenEntry is a bucket value of a fixture as the engine reads it: its
// key, value and the server's time of the write.
type goldenEntry struct {
	bucket, key string
	value       []byte
	created     time.Time
	rev         uint64
}

func (e goldenEntry) Bucket() string                  { return e.bucket }
func (e goldenEntry) Key() string                     { return e.key }
func (e goldenEntry) Value() []byte                   { return e.value }
func (e goldenEntry) Revision() uint64                { return e.rev }
func (e goldenEntry) Created() time.Time              { return e.created }
func (e goldenEntry) Delta() uint64                   { return 0 }
func (e goldenEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// goldenShared is a connection's reading side for build's fixture: the
// fixture's key (sealed builds) or accept_unsealed_until (43fd7c0), and a
// node at cluster level level among the build's nodes.
func goldenShared(t *testing.T, m golden.Manifest, level int) *shared {
	t.Helper()
	cfg := &Config{ClockSkew: caddy.Duration(2 * time.Second), Timeout: caddy.Duration(2 * time.Second), level: &level}
	if m.Sealed {
		cfg.SigningKeys = []string{m.SigningKey}
	} else {
		cfg.SigningKeys = []string{testSigningKey}
		cfg.AcceptUnsealedUntil = time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	}
	if err := cfg.validateTrust(); err != nil {
		t.Fatal(err)
	}
	s := &shared{cfg: cfg, p: cluster.Params{Name: m.Namespace, IdempotencyTTL: 100 * 365 * 24 * time.Hour}, log: zap.NewNop(),
		n: namesFor(m.Namespace)}
	s.initVersions()
	s.gate = cluster.NewGate(level, 0) // the build's nodes are known from the start
	s.queue = &queue{s: s, qp: *queueParams()}
	s.claims = &claims{s: s}
	return s
}

// TestGoldenEngineRecords (issue 30 item 5): the queued events, dead
// letters, idempotency records and wake-lane leases of each earlier
// build read with today's code, every field: 43fd7c0's unsealed ones
// (headers and body, read while accept_unsealed_until lasts), 453004b's
// sealed ones (the spool record, versions 1 and 2: a rendered wake, an
// agent run with its trace context, a forwarded request with its headers
// and the path below the prefix). A record without a write time (a
// pending claim, a lease of 453004b) is read while a node of that
// release runs (cluster level 0) and refused as a replay once none does.
func TestGoldenEngineRecords(t *testing.T) {
	for _, build := range []string{"43fd7c0", "453004b"} {
		t.Run(build, func(t *testing.T) {
			m, recs, err := golden.Read(filepath.Join("..", "testdata", "golden", build))
			if err != nil {
				t.Fatal(err)
			}
			s := goldenShared(t, m, 0)
			q := s.queue
			clientIP, trace := "", m.Sealed // 43fd7c0 carried neither the client address nor the trace context
			if m.Sealed {
				clientIP = "127.0.0.1"
			}
			counts := map[string]int{}
			var pending, settled, leases []goldenEntry
			for i, r := range recs {
				switch {
				case strings.HasPrefix(r.Subject, "hooks.hooks.queue.") || r.Subject == "hooks.hooks.dead":
					ev, err := q.decode(r.Subject, r.Header, r.Data, time.Time{})
					if err != nil {
						t.Errorf("%s: %v", r.Subject, err)
						continue
					}
					checkGoldenEvent(t, m, r.Subject, ev, clientIP, trace)
					counts[r.Subject]++
				case strings.HasPrefix(r.Subject, "$KV.hooks_hooks_idem."):
					e := goldenEntry{bucket: s.n.idem, key: strings.TrimPrefix(r.Subject, "$KV.hooks_hooks_idem."), value: r.Data,
						created: m.Start.Add(time.Second), rev: uint64(i + 1)}
					var probe struct {
						P bool  `json:"p"`
						T int64 `json:"t"`
					}
					_ = json.Unmarshal(r.Data[:len(r.Data)-map[bool]int{true: cluster.TagSize}[m.Sealed]], &probe)
					if probe.T != 0 {
						e.created = time.UnixMilli(probe.T) // stored when written
					}
					if probe.P {
						pending = append(pending, e)
					} else {
						settled = append(settled, e)
					}
				case r.Subject == "$KV.hooks_hooks_lanes.wake":
					leases = append(leases, goldenEntry{bucket: s.n.lanes, key: leaseKey, value: r.Data, created: m.Start.Add(2 * time.Second), rev: uint64(i + 1)})
				}
			}
			if counts["hooks.hooks.queue.wake"] != 1 || counts["hooks.hooks.queue.agent"] != 3 || counts["hooks.hooks.dead"] != 1 {
				t.Errorf("queued events and dead letters read: %v", counts)
			}

			// idempotency: the claim of the keyed request, then its reply
			keyed := m.Request("cluster-keyed-agent")
			if len(pending) != 1 || len(settled) != 1 {
				t.Fatalf("%d pending claims, %d settled replies", len(pending), len(settled))
			}
			r, ok, err := s.claims.decode(pending[0], 0)
			if err != nil || !ok || !r.Pending || r.Node == "" || r.Until < m.Start.UnixMilli() || r.Status != 0 || r.Body != nil {
				t.Errorf("pending claim: %+v, trusted %v, %v", r, ok, err)
			}
			r2, ok, err := s.claims.decode(settled[0], 0)
			wantBody := `{"ok":true,"runId":"` + keyed.EventID + `"}`
			if err != nil || !ok || r2.Pending || r2.Node != r.Node || r2.Status != http.StatusOK || string(r2.Body) != wantBody || r2.Until != 0 {
				t.Errorf("settled reply: %+v (body %s), trusted %v, %v; want %s", r2, r2.Body, ok, err, wantBody)
			}
			if pending[0].key != settled[0].key || len(pending[0].key) != 64 {
				t.Errorf("keys %q, %q", pending[0].key, settled[0].key)
			}
			if m.Sealed {
				// once every node runs level 1, a claim without its write time is a replay
				if _, ok, _ := goldenShared(t, m, cluster.LevelFreshRecords).claims.decode(pending[0], 0); ok {
					t.Error("a pending claim without its write time trusted at cluster level 1")
				}
			}

			// the wake lane's lease (453004b: held, then released at the stop)
			if !m.Sealed {
				if len(leases) != 0 {
					t.Errorf("43fd7c0 had no wake lane lease: %d records", len(leases))
				}
				return
			}
			if len(leases) < 2 {
				t.Fatalf("%d lease records", len(leases))
			}
			for i, e := range leases {
				state, holder := q.leaseState(e)
				want := byte(leaseHeld)
				if i == len(leases)-1 {
					want = leaseReleased
				}
				if state != want || holder == "" || holder != mustHolder(t, leases[0], s) {
					t.Errorf("lease %d: state %q holder %q, want %q", i, state, holder, want)
				}
			}
			if state, _ := goldenShared(t, m, cluster.LevelFreshRecords).queue.leaseState(leases[0]); state != 0 {
				t.Errorf("a lease without its write time held at cluster level 1 (state %q)", state)
			}
		})
	}
}

// mustHolder is the node a lease record names.
func mustHolder(t *testing.T, e goldenEntry, s *shared) string {
	t.Helper()
	v, ok := s.open(e.value, sealLease, s.n.lanes, leaseKey)
	l, ok2 := parseLease(v)
	if !ok || !ok2 || l.version != 1 {
		t.Fatalf("lease %q: opened %v, parsed %+v", e.value, ok, l)
	}
	return l.node
}

// checkGoldenEvent checks every field of a queued event or dead letter
// of a golden fixture against what was sent.
func checkGoldenEvent(t *testing.T, m golden.Manifest, subject string, ev *spool.Event, clientIP string, trace bool) {
	t.Helper()
	if ev.FirstSeen.Before(m.Start) || ev.FirstSeen.After(m.End) || ev.ClientIP != clientIP || ev.NextTry != (time.Time{}) {
		t.Errorf("%s %s: first seen %v, client %q, next try %v", subject, ev.ID, ev.FirstSeen, ev.ClientIP, ev.NextTry)
	}
	dead := subject == "hooks.hooks.dead"
	if !dead && (ev.LastError != "" || ev.Attempts != 0) {
		t.Errorf("%s %s: queued with attempts %d, reason %q", subject, ev.ID, ev.Attempts, ev.LastError)
	}
	var name string
	for _, r := range m.Requests {
		if r.EventID == ev.ID && name == "" {
			name = r.Name
		}
	}
	if name == "" && ev.Kind == spool.KindWake {
		name = "cluster-dead-wake" // a wake's answer names no id
	}
	r := m.Request(name)
	var body map[string]any
	_ = json.Unmarshal(ev.Body, &body)
	switch name {
	case "cluster-dead-wake":
		if ev.Kind != spool.KindWake || ev.Path != "/hooks/wake" || string(ev.Body) != r.Body || ev.Header != nil || ev.PathBelowPrefix != "" ||
			ev.TraceParent != "" {
			t.Errorf("wake %+v", ev)
		}
		if dead && (ev.Attempts != 1 || ev.LastError != `gateway status 400: {"ok":false,"error":"refused for the golden fixture"}`) {
			t.Errorf("dead letter: attempts %d, reason %q", ev.Attempts, ev.LastError)
		}
	case "cluster-delivered-agent", "cluster-keyed-agent":
		want := map[string]string{"cluster-delivered-agent": "golden cluster agent", "cluster-keyed-agent": "golden keyed agent"}[name]
		if ev.Kind != spool.KindAgent || ev.Path != "/hooks/agent" || body["message"] != want || body["name"] != "Golden" ||
			!strings.HasPrefix(body["sessionKey"].(string), "hook:") || len(body) != 3 || ev.Header != nil || dead {
			t.Errorf("%s: %+v (body %s)", name, ev, ev.Body)
		}
		wantParent, wantState := "", ""
		if trace && name == "cluster-delivered-agent" {
			wantParent, wantState = r.Header["Traceparent"], r.Header["Tracestate"]
		}
		if ev.TraceParent != wantParent || ev.TraceState != wantState {
			t.Errorf("%s: trace %q %q, want %q %q", name, ev.TraceParent, ev.TraceState, wantParent, wantState)
		}
	case "cluster-retried-forward":
		if ev.Kind != spool.KindAgent || ev.Path != r.Path || string(ev.Body) != r.Body || dead {
			t.Errorf("forwarded %+v", ev)
		}
		if !trace { // 43fd7c0 did not carry a forwarded request's headers through the cluster
			if ev.Header != nil || ev.PathBelowPrefix != "" {
				t.Errorf("forwarded by 43fd7c0: %+v", ev)
			}
			return
		}
		want := map[string]string{"Accept-Encoding": "gzip", "Content-Type": "application/json", "Host": "", "Idempotency-Key": ev.ID,
			"User-Agent": "Go-http-client/1.1", "X-Golden": r.Header["X-Golden"]}
		if len(ev.Header) != len(want) || ev.PathBelowPrefix != strings.TrimPrefix(r.Path, "/hooks") {
			t.Errorf("forwarded headers %v, below %q", ev.Header, ev.PathBelowPrefix)
		}
		for k, v := range want {
			if got := ev.Header[k]; len(got) != 1 || v != "" && got[0] != v {
				t.Errorf("forwarded header %s: %q, want %q", k, got, v)
			}
		}
	default:
		t.Errorf("%s: an event no request made: %+v", subject, ev)
	}
}
