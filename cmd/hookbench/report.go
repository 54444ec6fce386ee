package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// report is the outcome of a run, printed as a table or as JSON.
type report struct {
	Time        time.Time       `json:"time"`
	Go          string          `json:"go"`
	Platform    string          `json:"platform"`
	CPUs        int             `json:"cpus"`
	Connections int             `json:"connections"`
	DurationS   float64         `json:"duration_per_row_s"`
	Rounds      int             `json:"rounds"`
	WarmupS     float64         `json:"warmup_per_row_s"`
	Spread      string          `json:"spread"`
	AccessLog   bool            `json:"access_log"`
	Rows        []rowReport     `json:"rows"`
	Twins       []twinReport    `json:"twins,omitempty"`
	Signatures  []signatureCost `json:"signatures,omitempty"`
	Sink        *sinkReport     `json:"sink,omitempty"`
	Watched     *watchReport    `json:"watched,omitempty"` // row (w)'s console and cluster tail
	Profile     *profileReport  `json:"profile,omitempty"`
}

// rowReport is one row of the table.
type rowReport struct {
	ID        string            `json:"id"`
	Title     string            `json:"title"`
	Skipped   string            `json:"skipped,omitempty"`
	Requests  uint64            `json:"requests"`
	Seconds   float64           `json:"seconds"`
	RPS       float64           `json:"rps"`
	P50ms     float64           `json:"p50_ms"`
	P99ms     float64           `json:"p99_ms"`
	MaxMs     float64           `json:"max_ms"`
	Expect    int               `json:"expect_status"`
	Errors    uint64            `json:"errors"`
	Statuses  map[string]uint64 `json:"statuses,omitempty"`
	NetErrors uint64            `json:"net_errors"`
	Dials     uint64            `json:"connections_opened"`
	RSSMiB    float64           `json:"max_rss_mib"`
	// CPU time per answered request, in µs: of the ingress (all its
	// threads), of the sink, and of hookbench (the load generator).
	IngressCPUus float64 `json:"ingress_cpu_us_per_req"`
	SinkCPUus    float64 `json:"sink_cpu_us_per_req"`
	ClientCPUus  float64 `json:"client_cpu_us_per_req"`
	Base         string  `json:"ratio_base"`
	Ratio        float64 `json:"ratio"` // 0: the base did not run
	Target       float64 `json:"target_ratio,omitempty"`
	MaxP99ms     float64 `json:"target_p99_ms,omitempty"`
	Verdict      string  `json:"verdict,omitempty"` // PASS, MISS or n/a; "" without a target
}

// twinReport compares a row with its twin that has one feature off (the
// event log): Ratio is the row's req/s over the twin's.
type twinReport struct {
	Row     string  `json:"row"`
	Twin    string  `json:"twin"`
	Ratio   float64 `json:"ratio"`
	Target  float64 `json:"target_ratio"`
	Verdict string  `json:"verdict"`
}

// signatureCost is a signed row's ingress CPU per request above its
// token twin's (v), the signature's cost, and that as a share of row
// (c)'s CPU per request.
type signatureCost struct {
	Row     string  `json:"row"`
	ExtraUs float64 `json:"extra_cpu_us_per_req"`
	BaseUs  float64 `json:"c_cpu_us_per_req"`
	Share   float64 `json:"share_of_c"`
	Target  float64 `json:"target_share,omitempty"`
	Verdict string  `json:"verdict,omitempty"` // PASS or MISS; "" without a target
}

// sinkReport compares what the sink received with what the rows that
// reach it were told was accepted.
type sinkReport struct {
	Received uint64 `json:"received"`
	Expected uint64 `json:"expected"`
	Error    string `json:"error,omitempty"`
}

// profileReport says where the CPU profile went.
type profileReport struct {
	Row  string  `json:"row"`
	File string  `json:"file"`
	RPS  float64 `json:"rps"`
}

// report assembles the measurements in catalogue order.
func (b *bench) report() *report {
	rep := &report{
		Time: time.Now().UTC().Truncate(time.Second), Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
		Connections: b.o.conns, DurationS: b.o.duration.Seconds(), Rounds: b.o.rounds,
		WarmupS: b.o.warmup.Seconds(), Spread: b.o.spread, AccessLog: b.o.accessLog,
	}
	for _, r := range rowCatalogue() {
		if why, ok := b.skipped[r.id]; ok {
			rep.Rows = append(rep.Rows, rowReport{ID: r.id, Title: r.title, Skipped: why, Base: r.base, Target: r.target})
			continue
		}
		if res := b.results[r.id]; res != nil {
			rep.Rows = append(rep.Rows, measuredRow(r, res, b.rss[r.id]))
		}
	}
	rep.rate()
	rep.twins()
	rep.signatures()
	if _, ok := b.results["w"]; ok {
		rep.Watched = &b.watched
	}
	return rep
}

// signatures takes each signed row's CPU per request above its token
// twin's, against row (c)'s.
func (rep *report) signatures() {
	tw, ok1 := rep.row(tokenTwin)
	c, ok2 := rep.row("c")
	if !ok1 || !ok2 || tw.Skipped != "" || c.Skipped != "" || c.IngressCPUus == 0 {
		return
	}
	for _, r := range rowCatalogue() {
		if r.signed == "" || r.id == tokenTwin {
			continue
		}
		row, ok := rep.row(r.id)
		if !ok || row.Skipped != "" {
			continue
		}
		sc := signatureCost{Row: r.id, ExtraUs: row.IngressCPUus - tw.IngressCPUus, BaseUs: c.IngressCPUus, Target: r.costTarget}
		sc.Share = sc.ExtraUs / sc.BaseUs
		if sc.Target > 0 {
			sc.Verdict = "PASS"
			if sc.Share >= sc.Target {
				sc.Verdict = "MISS"
			}
		}
		rep.Signatures = append(rep.Signatures, sc)
	}
}

// twins compares each row that has a twin with it.
func (rep *report) twins() {
	for _, r := range rowCatalogue() {
		if r.twinOf == "" {
			continue
		}
		on, ok1 := rep.row(r.twinOf)
		off, ok2 := rep.row(r.id)
		if !ok1 || !ok2 || on.Skipped != "" || off.Skipped != "" || off.RPS == 0 {
			continue
		}
		tr := twinReport{Row: on.ID, Twin: off.ID, Ratio: on.RPS / off.RPS, Target: r.twinTarget, Verdict: "PASS"}
		if tr.Ratio < tr.Target {
			tr.Verdict = "MISS"
		}
		rep.Twins = append(rep.Twins, tr)
	}
}

// measuredRow turns a result into a row of the report.
func measuredRow(r rowDef, res *result, rss int64) rowReport {
	rr := rowReport{
		ID: r.id, Title: r.title, Requests: res.requests, Seconds: res.elapsed.Seconds(), RPS: res.rps(),
		P50ms: ms(res.hist.quantile(0.50)), P99ms: ms(res.hist.quantile(0.99)), MaxMs: ms(res.hist.max),
		Expect: r.expect, Errors: res.errors(r.expect), NetErrors: res.netErrs, Dials: res.dials,
		RSSMiB: float64(rss) / (1 << 20), Base: r.base, Target: r.target, MaxP99ms: ms(r.maxP99),
		Statuses: map[string]uint64{},
	}
	if res.requests > 0 {
		per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(res.requests) }
		rr.IngressCPUus, rr.SinkCPUus, rr.ClientCPUus = per(res.cpu.ingress), per(res.cpu.sink), per(res.cpu.client)
	}
	for st, n := range res.statuses {
		if n > 0 {
			rr.Statuses[strconv.Itoa(st)] = n
		}
	}
	return rr
}

// ms converts to fractional milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate fills in every row's ratio to its base and its verdict.
func (rep *report) rate() {
	rps := map[string]float64{}
	for _, r := range rep.Rows {
		if r.Skipped == "" && r.RPS > 0 {
			rps[r.ID] = r.RPS
		}
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Skipped != "" {
			continue
		}
		if base := rps[r.Base]; base > 0 {
			r.Ratio = r.RPS / base
		}
		switch {
		case r.Target == 0 && r.MaxP99ms == 0:
		case r.Ratio == 0:
			r.Verdict = "n/a"
		case r.Ratio >= r.Target && (r.MaxP99ms == 0 || r.P99ms < r.MaxP99ms):
			r.Verdict = "PASS"
		default:
			r.Verdict = "MISS"
		}
	}
}

// writeJSON prints the report as indented JSON.
func (rep *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeText prints the table and its notes.
func (rep *report) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "hookbench: %d connections, %s per row in %d interleaved rounds (+%s warm-up); %s %s, %d CPUs\n\n",
		rep.Connections, fmtSeconds(rep.DurationS), rep.Rounds, fmtSeconds(rep.WarmupS), rep.Go, rep.Platform, rep.CPUs)
	fmt.Fprintf(&b, "%-3s  %-42s %9s %8s %8s %7s %7s %8s  %-7s  %s\n", "row", "what", "req/s", "p50", "p99", "errors", "RSS", "cpu/req", "ratio", "target")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "(%s)  %-42s skipped (%s)\n", r.ID, r.Title, r.Skipped)
			continue
		}
		ratio := "–"
		if r.Ratio > 0 {
			// truncated, not rounded, so that 0.895 against 0.90 reads as a miss
			ratio = fmt.Sprintf("%.2f×%s", math.Floor(r.Ratio*100)/100, r.Base)
		}
		fmt.Fprintf(&b, "(%s)  %-42s %9.0f %8s %8s %7d %7s %8s  %-7s  %s\n", r.ID, r.Title, r.RPS,
			fmtMs(r.P50ms), fmtMs(r.P99ms), r.Errors, fmt.Sprintf("%.0fMiB", r.RSSMiB), fmt.Sprintf("%.1fµs", r.IngressCPUus), ratio, r.targetText())
	}
	for _, note := range rep.notes() {
		fmt.Fprintf(&b, "\n%s", note)
	}
	b.WriteString("\n")
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// targetText is "≥0.90 PASS" and the like.
func (r rowReport) targetText() string {
	if r.Target == 0 && r.MaxP99ms == 0 {
		return ""
	}
	var parts []string
	if r.Target > 0 {
		parts = append(parts, fmt.Sprintf("≥%.2f×%s", r.Target, r.Base))
	}
	if r.MaxP99ms > 0 {
		parts = append(parts, "p99<"+fmtMs(r.MaxP99ms))
	}
	return strings.Join(parts, ", ") + " " + r.Verdict
}

// notes are the remarks under the table: unexpected answers, the spread
// of row (e), the sink check and the profile.
func (rep *report) notes() []string {
	var out []string
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			continue
		}
		if r.ID == "e" {
			how := fmt.Sprintf("%d connections from distinct 127/8 source addresses, %d requests each", r.Dials, defaultAuthFailures-1)
			if rep.Spread == "xff" {
				how = fmt.Sprintf("X-Forwarded-For cycling over %d addresses from a trusted proxy", forwardedAddrs)
			}
			out = append(out, fmt.Sprintf("(e) %s; %d of %d answers were 429 (address locked).", how, r.Statuses["429"], r.Requests))
			if j, ok := rep.row("j"); ok && rep.Spread != "xff" && j.Skipped == "" && j.RPS > 0 {
				out = append(out, fmt.Sprintf("(e) is %.2f×(j): the static response paying the same connection churn.", r.RPS/j.RPS))
			}
		}
		if r.Errors > 0 {
			out = append(out, fmt.Sprintf("(%s) %d errors: statuses %v (want %d), %d connection errors.", r.ID, r.Errors, r.Statuses, r.Expect, r.NetErrors))
		}
	}
	for _, tw := range rep.Twins {
		out = append(out, fmt.Sprintf("(%s) is %.2f×(%s), the same with the event log off: ≥%.2f %s.", tw.Row,
			math.Floor(tw.Ratio*100)/100, tw.Twin, tw.Target, tw.Verdict))
	}
	for _, sc := range rep.Signatures {
		target := ""
		if sc.Target > 0 {
			target = fmt.Sprintf(": <%.0f %% %s", sc.Target*100, sc.Verdict)
		}
		out = append(out, fmt.Sprintf("(%s) signature: %+.1fµs CPU per request over (%s), %.0f %% of (c)'s %.1fµs%s.",
			sc.Row, sc.ExtraUs, tokenTwin, sc.Share*100, sc.BaseUs, target))
	}
	if s := rep.Sink; s != nil {
		switch {
		case s.Error != "":
			out = append(out, "sink: could not read its counts: "+s.Error)
		case s.Received == s.Expected:
			out = append(out, fmt.Sprintf("sink: received %d actions = every success of the rows that reach it.", s.Received))
		default:
			out = append(out, fmt.Sprintf("sink: received %d actions, but the rows that reach it had %d successes.", s.Received, s.Expected))
		}
	}
	if w := rep.Watched; w != nil {
		line := fmt.Sprintf("(w) ran with a console open (%d refreshes, every %s) and a cluster tail attached (%d stream messages read); %d admin requests failed.",
			w.Polls, consolePoll, w.Messages, w.Errors)
		if w.LastErr != "" {
			line += " Last: " + w.LastErr
		}
		out = append(out, line)
	}
	if p := rep.Profile; p != nil {
		out = append(out, fmt.Sprintf("CPU profile of the ingress during (%s) at %.0f req/s: %s (go tool pprof -top %s)", p.Row, p.RPS, p.File, p.File))
	}
	return out
}

// fmtMs prints milliseconds with useful precision.
func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fms", v)
}

// fmtSeconds prints a whole or fractional number of seconds.
func fmtSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64) + "s"
}

// row returns the report row id.
func (rep *report) row(id string) (rowReport, bool) {
	for _, r := range rep.Rows {
		if r.ID == id {
			return r, true
		}
	}
	return rowReport{}, false
}
