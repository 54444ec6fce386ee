package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/version"
)

func TestOutcomeVersionAgrees(t *testing.T) {
	if outcomeV2 != version.OutcomeMessage || wireVersion != version.ClusterEnvelope || LevelClusterView != version.ClusterLevel {
		t.Errorf("outcome v%d, envelope v%d, level %d; internal/version says %d, %d, %d", outcomeV2, wireVersion, LevelClusterView,
			version.OutcomeMessage, version.ClusterEnvelope, version.ClusterLevel)
	}
}

// sent encodes the next message of snd for b (numbered or not).
func sent(t *testing.T, snd *OutcomeSender, b OutcomeBatch, numbered bool) []byte {
	t.Helper()
	var msg []byte
	if err := snd.Send(b, numbered, func(m []byte) error { msg = m; return nil }); err != nil || msg == nil {
		t.Fatalf("Send: %v, %q", err, msg)
	}
	return msg
}

// TestOutcomeReaderDropsReplays (issue 34 B1): a recorded outcome
// message published again is read once; numbered messages that overtake
// each other are each read once; one older than the window, or too far
// behind its sender's newest, is a replay; version 1 is read once per
// message while it is allowed and refused when not.
func TestOutcomeReaderDropsReplays(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	skew := 2 * time.Second
	batch := func(id string, at time.Time) OutcomeBatch {
		return OutcomeBatch{Node: "n1", Time: at, Items: []Outcome{{ID: id, State: eventlog.StateDelivered, Attempts: 1, GatewayStatus: 200}}}
	}
	snd := NewOutcomeSender()
	m1, m2, m3 := sent(t, snd, batch("e1", now), true), sent(t, snd, batch("e2", now), true), sent(t, snd, batch("e3", now), true)
	old := sent(t, snd, batch("e4", now.Add(-OutcomeWindow-skew-time.Second)), true)
	v1 := sent(t, snd, batch("e5", now), false)
	if !strings.Contains(string(m1), `"v":2`) || !strings.Contains(string(v1), `"v":1`) || strings.Contains(string(v1), `"from"`) {
		t.Fatalf("numbered %s, unnumbered %s", m1, v1)
	}
	far := NewOutcomeSender()
	var farMsgs [][]byte
	for i := range replayBits + 2 {
		farMsgs = append(farMsgs, sent(t, far, batch("f"+string(rune('a'+i%26)), now), true))
	}

	type step struct {
		msg     []byte
		allowV1 bool
		want    string // "" read; "replay"; "refused"
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"once, then replays", []step{{m1, false, ""}, {m1, false, "replay"}, {m1, false, "replay"}}},
		{"overtaking", []step{{m3, false, ""}, {m1, false, ""}, {m2, false, ""}, {m2, false, "replay"}, {m3, false, "replay"}}},
		{"older than the window", []step{{old, false, "replay"}}},
		{"too far behind", []step{{farMsgs[len(farMsgs)-1], false, ""}, {farMsgs[0], false, "replay"}, {farMsgs[2], false, ""}}},
		{"version 1 allowed", []step{{v1, true, ""}, {v1, true, "replay"}}},
		{"version 1 refused", []step{{v1, false, "refused"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewOutcomeReader()
			for i, s := range tc.steps {
				_, err := r.Read(s.msg, now, skew, s.allowV1)
				got := ""
				switch {
				case errors.Is(err, ErrReplay):
					got = "replay"
				case err != nil:
					got = "refused"
				}
				if got != s.want {
					t.Errorf("step %d: %q (%v), want %q", i, got, err, s.want)
				}
			}
		})
	}
}

// TestOutcomeReaderForgets: the reader's memory is bounded by the
// senders heard from within the window (and maxUnnumbered hashes): a
// sender silent past it is forgotten, and a replay of its messages is
// stale by then.
func TestOutcomeReaderForgets(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	skew := time.Second
	r := NewOutcomeReader()
	for i := range 100 {
		snd := NewOutcomeSender()
		msg := sent(t, snd, OutcomeBatch{Node: "n", Time: now, Items: []Outcome{{ID: "e", State: eventlog.StateDead}}}, true)
		if _, err := r.Read(msg, now, skew, false); err != nil {
			t.Fatal(err)
		}
		v1 := sent(t, snd, OutcomeBatch{Node: "n", Time: now, Items: []Outcome{{ID: "e" + string(rune('a'+i%26)) + string(rune('a'+i/26)), State: eventlog.StateDead}}}, false)
		if _, err := r.Read(v1, now, skew, true); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.senders) != 100 || len(r.hashes) != 100 {
		t.Fatalf("%d senders, %d hashes", len(r.senders), len(r.hashes))
	}
	later := now.Add(OutcomeWindow + 3*skew + time.Second)
	snd := NewOutcomeSender()
	msg := sent(t, snd, OutcomeBatch{Node: "n", Time: later, Items: []Outcome{{ID: "x", State: eventlog.StateDead}}}, true)
	if _, err := r.Read(msg, later, skew, false); err != nil {
		t.Fatal(err)
	}
	if len(r.senders) != 1 || len(r.hashes) != 0 {
		t.Errorf("after the window: %d senders, %d hashes; want the silent ones forgotten", len(r.senders), len(r.hashes))
	}
}

// TestFresh: a bucket value stored within FreshWindow of its write time
// is fresh; written back later, it is not.
func TestFresh(t *testing.T) {
	w := time.UnixMilli(1_800_000_000_000)
	skew, timeout := 2*time.Second, time.Second
	for _, tc := range []struct {
		stored time.Time
		want   bool
	}{
		{w, true}, {w.Add(-skew), true}, {w.Add(FreshWindow(skew, timeout)), true},
		{w.Add(FreshWindow(skew, timeout) + time.Millisecond), false}, {w.Add(time.Hour), false},
	} {
		if got := Fresh(w, tc.stored, skew, timeout); got != tc.want {
			t.Errorf("stored %s after the write: %v, want %v", tc.stored.Sub(w), got, tc.want)
		}
	}
}

// TestGateLevel: the gate is the lowest level among the live members,
// this node included; it errs low: at start (and after a reconnection)
// it is 0 until the membership has been heard, and a level seen stays in
// force for GateHold after the member that announced it is gone; a nil
// gate keeps the gated behaviours off.
func TestGateLevel(t *testing.T) {
	g := NewGate(1, GateHold)
	a, b := memberID{1}, memberID{2}
	heard := func() { g.lowUntil.Store(0) } // GateHold has passed
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"started: unsure", func() {}, 0},
		{"membership heard", heard, 1},
		{"a newer peer", func() { g.set(a, "n", TopicLockout, 3) }, 1},
		{"an older peer", func() { g.set(b, "n", TopicLockout, 0) }, 0},
		{"it upgrades, its level 0 still in force", func() { g.set(b, "n", TopicLockout, 1) }, 0},
		{"GateHold later", heard, 1},
		{"an older peer again", func() { g.set(b, "n", TopicLockout, 0) }, 0},
		{"it leaves, still in force", func() { g.forget(b) }, 0},
		{"GateHold later", heard, 1},
		{"reconnected: unsure", g.Unsure, 0},
		{"membership heard", heard, 1},
		{"all leave", func() { g.forget(a, b) }, 1},
	}
	for i, s := range steps {
		s.do()
		if got := g.Level(); got != s.want {
			t.Errorf("step %d (%s): level %d, want %d", i, s.name, got, s.want)
		}
	}
	var none *Gate
	if none.Level() != 0 || none.AtLeast(LevelFreshRecords) || none.Own() != version.ClusterLevel {
		t.Error("a nil gate must keep the gated behaviours off and announce this build's level")
	}
	none.set(a, "n", TopicLockout, 1)
	none.forget(a)
	none.Unsure()
}

// TestNewerEnvelope: a cluster message of a newer envelope is told from a
// malformed one (and counted by its readers).
func TestNewerEnvelope(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want int
	}{
		{[]byte{wireMagic, wireVersion + 1, kindLock}, wireVersion + 1},
		{[]byte{wireMagic, 9}, 9},
		{[]byte{wireMagic, wireVersion, kindLock}, 0},
		{[]byte{wireMagic, 1, kindFail}, 0},
		{[]byte{'x', 9}, 0},
		{nil, 0},
	} {
		if got := newerWire(tc.b); got != tc.want {
			t.Errorf("%x: %d, want %d", tc.b, got, tc.want)
		}
		if _, err := parseWire(tc.b); err == nil {
			t.Errorf("%x parsed", tc.b)
		}
	}
}
