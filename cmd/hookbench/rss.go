package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// Targets of the RSS mode.
const (
	rssRuns        = 3
	rssLimit       = 80 << 20 // steady RSS under row (c)
	rssGrowthSlack = 4 << 20  // allowed difference between the first and last run
)

// rssReport is the outcome of the -rss mode.
type rssReport struct {
	Connections int      `json:"connections"`
	RunS        float64  `json:"run_s"`
	IdleMiB     float64  `json:"idle_rss_mib"`
	Runs        []rssRun `json:"runs"`
	GrowthMiB   float64  `json:"growth_mib"` // steady RSS of the last run minus the first
	LimitMiB    float64  `json:"limit_mib"`
	Verdict     string   `json:"verdict"`
}

// rssRun is one run of row (c).
type rssRun struct {
	RPS       float64 `json:"rps"`
	P99ms     float64 `json:"p99_ms"`
	Errors    uint64  `json:"errors"`
	SteadyMiB float64 `json:"steady_rss_mib"` // median over the second half of the run
	MaxMiB    float64 `json:"max_rss_mib"`
}

// measureRSS runs row (c) alone for -rss, rssRuns times in a row, and
// reports the ingress's steady RSS in each run.
func (b *bench) measureRSS(ctx context.Context) (*rssReport, error) {
	r, ok := findRow(b.rows, "c")
	if !ok {
		return nil, fmt.Errorf("row (c) does not run")
	}
	idle, err := b.in.rss()
	if err != nil {
		return nil, fmt.Errorf("reading the ingress RSS: %w", err)
	}
	rep := &rssReport{Connections: b.o.conns, RunS: b.o.rss.Seconds(), IdleMiB: mib(idle), LimitMiB: mib(rssLimit)}
	var steady []int64
	for i := 1; i <= rssRuns; i++ {
		fmt.Fprintf(b.progress, "rss run %d/%d: row (c) for %s …\n", i, rssRuns, b.o.rss)
		sampler := b.sampleRSS(time.Second)
		res := runLoad(ctx, b.specs[r.id], b.o.conns, b.o.rss)
		s := sampler.stop()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := steadyRSS(s.samples)
		steady = append(steady, st)
		rep.Runs = append(rep.Runs, rssRun{RPS: res.rps(), P99ms: ms(res.hist.quantile(0.99)), Errors: res.errors(r.expect),
			SteadyMiB: mib(st), MaxMiB: mib(s.max)})
	}
	growth := steady[len(steady)-1] - steady[0]
	rep.GrowthMiB = mib(growth)
	rep.Verdict = "PASS"
	if slices.Max(steady) >= rssLimit || growth > rssGrowthSlack {
		rep.Verdict = "MISS"
	}
	return rep, nil
}

// steadyRSS is the median of the second half of the samples: the level
// the process settles at once warm.
func steadyRSS(samples []int64) int64 {
	if len(samples) == 0 {
		return 0
	}
	half := slices.Clone(samples[len(samples)/2:])
	slices.Sort(half)
	return half[len(half)/2]
}

// mib converts bytes to MiB.
func mib(v int64) float64 { return float64(v) / (1 << 20) }

// writeRSSReport prints the RSS report as a table or JSON.
func writeRSSReport(w io.Writer, o options, rep *rssReport) error {
	if o.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "hookbench -rss: row (c) hooks wake, sync, %d connections, %s per run; idle RSS %.1f MiB\n\n",
		rep.Connections, fmtSeconds(rep.RunS), rep.IdleMiB)
	fmt.Fprintf(w, "%-4s %9s %8s %7s %12s %10s\n", "run", "req/s", "p99", "errors", "steady RSS", "max RSS")
	for i, r := range rep.Runs {
		fmt.Fprintf(w, "%-4d %9.0f %8s %7d %8.1f MiB %6.1f MiB\n", i+1, r.RPS, fmtMs(r.P99ms), r.Errors, r.SteadyMiB, r.MaxMiB)
	}
	_, err := fmt.Fprintf(w, "\nsteady RSS < %.0f MiB and growth from run 1 to %d ≤ %.0f MiB (was %+.1f MiB): %s\n",
		rep.LimitMiB, len(rep.Runs), mib(rssGrowthSlack), rep.GrowthMiB, rep.Verdict)
	return err
}
