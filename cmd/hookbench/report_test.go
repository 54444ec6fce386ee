package main

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRate(t *testing.T) {
	rep := &report{Rows: []rowReport{
		{ID: "a", RPS: 40000, Base: "a"},
		{ID: "b", RPS: 10000, Base: "b"},
		{ID: "c", RPS: 10500, Base: "b", Target: 1.0},
		{ID: "d", RPS: 8000, Base: "b", Target: 0.9},
		{ID: "e", RPS: 36000, Base: "a", Target: 0.9},
		{ID: "g", Skipped: "not supported by this build", Base: "b", Target: 0.8},
		{ID: "i", RPS: 6000, Base: "c", Target: 0.5, MaxP99ms: 25, P99ms: 30},
		{ID: "x", RPS: 100, Base: "z", Target: 0.5},
	}}
	rep.rate()
	want := map[string]struct {
		ratio   float64
		verdict string
	}{
		"a": {1, ""},
		"b": {1, ""},
		"c": {1.05, "PASS"},
		"d": {0.8, "MISS"},
		"e": {0.9, "PASS"}, // exactly at the target
		"g": {0, ""},
		"i": {6000.0 / 10500, "MISS"}, // ratio met, p99 over the limit
		"x": {0, "n/a"},               // base did not run
	}
	for _, r := range rep.Rows {
		w := want[r.ID]
		if diff := r.Ratio - w.ratio; diff > 1e-9 || diff < -1e-9 || r.Verdict != w.verdict {
			t.Errorf("row %s: ratio %v verdict %q, want %v %q", r.ID, r.Ratio, r.Verdict, w.ratio, w.verdict)
		}
	}
}

func TestWriteText(t *testing.T) {
	rep := &report{Connections: 32, DurationS: 10, Rounds: 5, WarmupS: 1, Spread: "bind", Rows: []rowReport{
		{ID: "a", Title: "respond", RPS: 40000, Base: "a", Requests: 400000},
		{ID: "e", Title: "401 flood", RPS: 38000, Base: "a", Target: 0.9, Requests: 380000, Dials: 20000,
			Expect: 401, Errors: 12, Statuses: map[string]uint64{"401": 379988, "429": 12}},
		{ID: "f", Title: "429 flood", RPS: 35980, Base: "a", Target: 0.9, Requests: 359800, Expect: 429},
		{ID: "h", Title: "transform", Skipped: "not supported by this build", Base: "b", Target: 0.5},
		{ID: "j", Title: "respond with churn", RPS: 40000, Base: "a", Requests: 400000, Dials: 21000},
	}, Sink: &sinkReport{Received: 5, Expected: 7}}
	rep.rate()
	var buf bytes.Buffer
	if err := rep.writeText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"(h)  transform", "skipped (not supported by this build)",
		"0.95×a", "≥0.90×a PASS",
		"0.89×a   ≥0.90×a MISS", // 0.8995 is shown truncated, matching the verdict
		"12 of 380000 answers were 429",
		"(e) is 0.95×(j)",
		"received 5 actions, but the rows that reach it had 7 successes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := rep.writeJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back.Rows) != 5 || back.Rows[1].Verdict != "PASS" {
		t.Fatalf("JSON round trip: %v, %+v", err, back.Rows)
	}
}

// TestSignatures: a signed row's cost is its CPU per request above the
// token twin (v), as a share of (c)'s; (t) and (u) carry the issue's
// 10 % target, (s) is reported without one; without (v) or (c) nothing
// is computed.
func TestSignatures(t *testing.T) {
	rows := []rowReport{
		{ID: "c", IngressCPUus: 50},
		{ID: "s", IngressCPUus: 58},
		{ID: "t", IngressCPUus: 54.9},
		{ID: "u", IngressCPUus: 120},
		{ID: "v", IngressCPUus: 50},
	}
	rep := &report{Rows: rows}
	rep.signatures()
	want := []signatureCost{
		{Row: "s", ExtraUs: 8, BaseUs: 50, Share: 0.16},
		{Row: "t", ExtraUs: 4.9, BaseUs: 50, Share: 0.098, Target: 0.10, Verdict: "PASS"},
		{Row: "u", ExtraUs: 70, BaseUs: 50, Share: 1.4, Target: 0.10, Verdict: "MISS"},
	}
	if len(rep.Signatures) != len(want) {
		t.Fatalf("signatures %+v, want %+v", rep.Signatures, want)
	}
	for i, w := range want {
		g := rep.Signatures[i]
		if g.Row != w.Row || math.Abs(g.ExtraUs-w.ExtraUs) > 1e-9 || g.BaseUs != w.BaseUs || math.Abs(g.Share-w.Share) > 1e-9 ||
			g.Target != w.Target || g.Verdict != w.Verdict {
			t.Errorf("signature %d: %+v, want %+v", i, g, w)
		}
	}
	var buf bytes.Buffer
	if err := rep.writeText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"(s) signature: +8.0µs CPU per request over (v), 16 % of (c)'s 50.0µs.",
		"(u) signature: +70.0µs CPU per request over (v), 140 % of (c)'s 50.0µs: <10 % MISS.",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("the text lacks %q:\n%s", line, buf.String())
		}
	}
	for _, without := range []string{"c", "v"} {
		rep := &report{Rows: slices.DeleteFunc(slices.Clone(rows), func(r rowReport) bool { return r.ID == without })}
		if rep.signatures(); len(rep.Signatures) != 0 {
			t.Errorf("without (%s): %+v", without, rep.Signatures)
		}
	}
}
