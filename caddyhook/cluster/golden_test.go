package cluster

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/golden"
)

// readGolden reads build's fixture.
func readGolden(t testing.TB, build string) ([]golden.Record, golden.Manifest) {
	t.Helper()
	m, recs, err := golden.Read(filepath.Join("testdata", "golden", build))
	if err != nil {
		t.Fatal(err)
	}
	return recs, m
}

// The seal contexts of the engine's records (natscluster): part of the
// wire format, which no release changes. The lockout's topics (its
// announcements, batches and confirmations) are sealed as failures, the
// delivery nodes' announcements as members.
const (
	goldenSealMembers  = "members"
	goldenSealFailures = "failures"
	goldenSealLock     = "lock"
	goldenSealOutcome  = "outcome"
)

// TestGoldenClusterMessages (issue 30 item 5): the lockout's messages,
// the announcements, the lock records and the outcome messages that
// 453004b wrote (sealed) read with today's code, every field: each opens
// with the key it was sealed with, in its context, and today's decoders
// (parseWire, DecodeOutcomes) read it as that build meant it. Those of
// 43fd7c0 (before signing_key; its lockout broadcast every failure to
// every node, envelope version 1) are refused: against such a node each
// node keeps its own budget, as the README says.
func TestGoldenClusterMessages(t *testing.T) {
	recs, m := readGolden(t, "453004b")
	kr, err := NewKeyring([]string{m.SigningKey})
	if err != nil {
		t.Fatal(err)
	}
	var localhost Addr
	copy(localhost[:], []byte{10: 0xff, 11: 0xff, 12: 127, 13: 0, 14: 0, 15: 1})
	inRun := func(what string, ms int64) {
		t.Helper()
		if at := time.UnixMilli(ms); at.Before(m.Start.Add(-time.Second)) || at.After(m.End) {
			t.Errorf("%s: time %v outside the run (%v to %v)", what, at, m.Start, m.End)
		}
	}
	counts := map[string]int{}
	nodes := map[string]bool{}
	lastSeq := map[string]uint64{}
	failSeqs := map[uint64]bool{}
	var acks []wireMsg
	byID := map[string]string{} // outcome id → request name
	for _, r := range m.Requests {
		if r.EventID != "" && byID[r.EventID] == "" {
			byID[r.EventID] = r.Name
		}
	}
	for _, r := range recs {
		var seal string
		var ctx []string
		switch {
		case r.Subject == "hooks.hooks.deliver":
			seal, ctx = goldenSealMembers, []string{r.Subject}
		case r.Subject == "hooks.hooks.auth" || strings.HasPrefix(r.Subject, "hooks.hooks.auth."):
			// the lockout's topics: its announcements, failures and confirmations
			seal, ctx = goldenSealFailures, []string{r.Subject}
		case strings.HasPrefix(r.Subject, "$KV.hooks_hooks_locks."):
			seal, ctx = goldenSealLock, []string{"hooks_hooks_locks", strings.TrimPrefix(r.Subject, "$KV.hooks_hooks_locks.")}
		case r.Subject == "hooks.hooks.outcome":
			seal, ctx = goldenSealOutcome, []string{r.Subject}
		default:
			continue // the engine's own records: natscluster's golden test
		}
		payload, ok := kr.Open(r.Data, append([]string{seal}, ctx...)...)
		if !ok {
			t.Errorf("%s: does not open with the fixture's key in context %s %v", r.Subject, seal, ctx)
			continue
		}
		if seal == goldenSealOutcome {
			b, err := DecodeOutcomes(payload, m.End, time.Second)
			if err != nil || len(b.Items) != 1 || b.From != "" || b.N != 0 {
				t.Errorf("outcome %s: %+v, %v", payload, b, err)
				continue
			}
			nodes[b.Node] = true
			inRun("outcome", b.Time.UnixMilli())
			o := b.Items[0]
			counts["outcome "+o.State]++
			switch name := byID[o.ID]; {
			case o.State == eventlog.StateDelivered && (name == "cluster-delivered-agent" || name == "cluster-keyed-agent"):
				if o.Attempts != 1 || o.GatewayStatus != 200 || !strings.HasPrefix(o.RunID, "golden-run-") || o.Error != "" {
					t.Errorf("delivered outcome: %+v", o)
				}
			case o.State == eventlog.StateRetrying && name == "cluster-retried-forward":
				if o.Attempts != 1 || o.GatewayStatus != 503 || o.RunID != "" || o.Error != `gateway status 503: {"ok":false,"error":"busy"}` {
					t.Errorf("retrying outcome: %+v", o)
				}
			case o.State == eventlog.StateDead && name == "": // the wake: its answer names no id
				if o.Attempts != 1 || o.GatewayStatus != 400 || o.Error != `gateway status 400: {"ok":false,"error":"refused for the golden fixture"}` {
					t.Errorf("dead outcome: %+v", o)
				}
			default:
				t.Errorf("unexpected outcome %+v (request %q)", o, name)
			}
			continue
		}
		w, err := parseWire(payload)
		if err != nil {
			t.Errorf("%s: %v", r.Subject, err)
			continue
		}
		nodes[w.node] = true
		counts[string(w.kind)]++
		key := string(w.sender[:]) + string(w.kind)
		switch w.kind {
		case kindAlive, kindLeave:
			if w.seq <= lastSeq[key+r.Subject] || w.flags>>levelShift != 0 || w.flags&^flagHello != 0 {
				t.Errorf("announcement %+v: numbers grow per sender, level 0 (before v0.9.0)", w)
			}
			lastSeq[key+r.Subject] = w.seq
			inRun("announcement", w.ms)
		case kindFail:
			failSeqs[w.seq] = true
			if len(w.recs) == 0 {
				t.Errorf("failures %+v", w)
			}
			for _, rec := range w.recs {
				if rec.addr != localhost {
					t.Errorf("failure of %x, want ::ffff:127.0.0.1", rec.addr)
				}
				inRun("failure", rec.ms)
			}
		case kindAck:
			acks = append(acks, w)
		case kindLock:
			if w.seq != 0 || len(w.recs) != 1 || w.recs[0].addr != localhost || ctx[1] != "00000000000000000000ffff7f000001" {
				t.Errorf("lock %+v (key %s)", w, ctx[1])
			}
			inRun("lock end - 1m", w.recs[0].ms-time.Minute.Milliseconds()) // auth_failures 3 1m: locked for the window
		}
	}
	for _, a := range acks {
		if !failSeqs[a.batch] || len(a.recs) > 1 {
			t.Errorf("confirmation %+v of a batch not sent", a)
		}
	}
	want := map[string]int{"m": 1, "x": 1, "f": 1, "a": 1, "l": 1, "outcome delivered": 2, "outcome dead": 1, "outcome retrying": 1}
	for k, n := range want {
		if counts[k] < n {
			t.Errorf("%d records of kind %s, want at least %d (all: %v)", counts[k], k, n, counts)
		}
	}
	if len(nodes) != 2 {
		t.Errorf("node names %v, want the edge's and the delivery node's", nodes)
	}
	t.Logf("453004b, read: %v", counts)

	// 43fd7c0: envelope version 1, unsealed: refused
	recs, _ = readGolden(t, "43fd7c0")
	refused := 0
	for _, r := range recs {
		if r.Subject == "hooks.hooks.auth" || strings.HasPrefix(r.Subject, "$KV.hooks_hooks_locks.") {
			if r.Data[0] != wireMagic || r.Data[1] != 1 {
				t.Errorf("%s: not an envelope of version 1: %x", r.Subject, r.Data[:2])
			}
			if _, err := parseWire(r.Data); err == nil {
				t.Errorf("%s: a lockout message of 43fd7c0 was read", r.Subject)
			}
			refused++
		}
	}
	if refused < 2 {
		t.Errorf("%d lockout records of 43fd7c0 in the fixture", refused)
	}
}
