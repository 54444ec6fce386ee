package cluster

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// randomBatch is a batch with fields drawn from valid and hostile values.
func randomBatch(r *rand.Rand) OutcomeBatch {
	pick := func(vs ...string) string { return vs[r.IntN(len(vs))] }
	b := OutcomeBatch{
		Node: pick("a1b2c3d4-host", "a1b2c3d4-höst.example", "node with spaces", strings.Repeat("n", 90), "x\x00y"),
		Time: time.UnixMilli(1_700_000_000_000 + r.Int64N(1e9)).Add(time.Duration(r.IntN(1e6))),
	}
	n := r.IntN(MaxOutcomeItems + 8)
	if r.IntN(4) == 0 {
		n = MaxOutcomeItems + 8 // the worst case: every field at its bound
	}
	for range n {
		b.Items = append(b.Items, Outcome{
			ID:            pick("0b7f3c9e-1111-4c2a-9d7e-5a6b7c8d9e0f", "id.retry.42", "", "bad id", strings.Repeat("i", 200)),
			State:         pick(eventlog.StateDelivered, eventlog.StateDead, eventlog.StateRetrying, eventlog.StateQueued, eventlog.StateDropped, "sent", "<b>x</b>"),
			Attempts:      r.IntN(3*maxAttempts) - maxAttempts,
			GatewayStatus: pick2(r, 0, 200, 400, 99, 600, -1),
			RunID:         pick("run-1", "", "a\nb", "\u202eevil", strings.Repeat("r", 300), strings.Repeat("é", 100), strings.Repeat("&", 200)),
			Error:         pick("", "gateway status 400: {\"ok\":false}", "line\r\nbreak", strings.Repeat("e", 500), strings.Repeat("<\"", 300)),
		})
	}
	return b
}

func pick2(r *rand.Rand, vs ...int) int { return vs[r.IntN(len(vs))] }

// TestOutcomeRoundTrip: whatever a node publishes is read by the others
// as exactly its normalized form, which is bounded and which Normalize
// leaves as it is (so a node's own outcome, coming back, changes nothing).
func TestOutcomeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 1))
	now := time.UnixMilli(1_800_000_000_000)
	worst := OutcomeBatch{Node: strings.Repeat("n", 64), Time: now}
	for range MaxOutcomeItems {
		worst.Items = append(worst.Items, Outcome{ID: strings.Repeat("i", 128), State: eventlog.StateRetrying, Attempts: maxAttempts,
			GatewayStatus: 599, RunID: strings.Repeat("<", 300), Error: strings.Repeat("<", 300)})
	}
	if _, ok := EncodeOutcomes(worst); !ok {
		t.Fatalf("%d outcomes with every field at its bound do not fit in %d bytes", MaxOutcomeItems, MaxOutcomeBytes)
	}
	for i := range 2000 {
		b := randomBatch(r)
		n := b.Normalize()
		if !reflect.DeepEqual(n.Normalize(), n) {
			t.Fatalf("batch %d: Normalize is not idempotent: %+v", i, n)
		}
		msg, ok := EncodeOutcomes(b)
		if !ok {
			if len(n.Items) != 0 && n.Node != "" {
				t.Fatalf("batch %d: %d valid items not encoded", i, len(n.Items))
			}
			continue
		}
		got, err := DecodeOutcomes(msg, now, time.Second)
		if err != nil {
			t.Fatalf("batch %d: %v\n%s", i, err, msg)
		}
		if !reflect.DeepEqual(got, n) {
			t.Fatalf("batch %d: decoded %+v, want %+v", i, got, n)
		}
		for _, o := range got.Items {
			if !outcomeStates[o.State] || len(o.RunID) > MaxRunID || len(o.Error) > maxOutcomeError ||
				safetext.Line(o.RunID) != o.RunID || safetext.Line(o.Error) != o.Error || !outcomeIDRe.MatchString(o.ID) {
				t.Fatalf("batch %d: out of bounds after decoding: %+v", i, o)
			}
		}
	}
}

// TestDecodeOutcomesRefuses: messages a node never writes are refused.
func TestDecodeOutcomesRefuses(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	item := `{"id":"e1","state":"delivered","attempts":1,"status":200,"run_id":"r1"}`
	msg := func(v, node string, ms int64, items ...string) string {
		return fmt.Sprintf(`{"v":%s,"node":%q,"ms":%d,"items":[%s]}`, v, node, ms, strings.Join(items, ","))
	}
	many := make([]string, MaxOutcomeItems+1)
	for i := range many {
		many[i] = item
	}
	for name, m := range map[string]string{
		"too large":      msg("1", "n1", 1, item) + strings.Repeat(" ", MaxOutcomeBytes),
		"not JSON":       "\x00\x01",
		"unknown field":  `{"v":1,"node":"n1","ms":1,"items":[` + item + `],"html":"<b>"}`,
		"unknown item":   msg("1", "n1", 1, `{"id":"e1","state":"dead","script":"x"}`),
		"trailing data":  msg("1", "n1", 1, item) + `{}`,
		"version":        msg("2", "n1", 1, item),
		"no time":        msg("1", "n1", 0, item),
		"no items":       msg("1", "n1", 1),
		"too many items": msg("1", "n1", 1, many...),
		"node":           msg("1", "n 1", 1, item),
		"empty node":     msg("1", "", 1, item),
		"id":             msg("1", "n1", 1, `{"id":"e 1","state":"dead"}`),
		"state":          msg("1", "n1", 1, `{"id":"e1","state":"sent"}`),
		"attempts":       msg("1", "n1", 1, `{"id":"e1","state":"dead","attempts":-1}`),
		"status":         msg("1", "n1", 1, `{"id":"e1","state":"dead","status":99}`),
		"run id length":  msg("1", "n1", 1, `{"id":"e1","state":"delivered","run_id":"`+strings.Repeat("r", MaxRunID+1)+`"}`),
		"run id control": msg("1", "n1", 1, `{"id":"e1","state":"delivered","run_id":"a\u0007b"}`),
		"error newline":  msg("1", "n1", 1, `{"id":"e1","state":"dead","error":"a\nb"}`),
		"error length":   msg("1", "n1", 1, `{"id":"e1","state":"dead","error":"`+strings.Repeat("e", 300)+`"}`),
	} {
		if b, err := DecodeOutcomes([]byte(m), now, time.Second); err == nil {
			t.Errorf("%s: accepted as %+v", name, b)
		}
	}
	// a time from the future is clamped to now
	b, err := DecodeOutcomes([]byte(msg("1", "n1", now.Add(time.Hour).UnixMilli(), item)), now, time.Second)
	if err != nil || !b.Time.Equal(now) {
		t.Errorf("future time: %v %v, want clamped to %v", b.Time, err, now)
	}
}

// FuzzDecodeOutcomes: DecodeOutcomes never panics, and what it accepts
// encodes back to a message it reads the same.
func FuzzDecodeOutcomes(f *testing.F) {
	f.Add([]byte(`{"v":1,"node":"n1","ms":1,"items":[{"id":"e1","state":"dead","attempts":2,"status":400,"error":"x"}]}`))
	f.Add([]byte(`{"v":1,"node":"n1","ms":1,"items":[{"id":"e1","state":"delivered","run_id":"r\u00e9"}]}`))
	now := time.UnixMilli(1_800_000_000_000)
	f.Fuzz(func(t *testing.T, msg []byte) {
		b, err := DecodeOutcomes(msg, now, time.Second)
		if err != nil {
			return
		}
		again, ok := EncodeOutcomes(b)
		if !ok {
			t.Fatalf("accepted %q, not encodable", msg)
		}
		b2, err := DecodeOutcomes(again, now, time.Second)
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("accepted %q as %+v, re-read as %+v (%v)", msg, b, b2, err)
		}
	})
}

// maxOutcomeError bounds an error line carried (safetext.Line's bound
// plus its ellipsis).
const maxOutcomeError = safetext.MaxLen + len("…")
