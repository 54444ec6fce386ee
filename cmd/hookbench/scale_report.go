package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
)

// scaleReport is a -cluster-scale run's result.
type scaleReport struct {
	Connections int            `json:"connections"`
	FloodRate   int            `json:"flood_rate"`
	Duration    float64        `json:"duration_s"`
	Limit       int            `json:"auth_failures"`
	LoadBefore  string         `json:"load_average_before"`
	LoadAfter   string         `json:"load_average_after"`
	Rows        []scaleRow     `json:"rows"`
	Delivery    *scaleDelivery `json:"delivery,omitempty"`
	Rate        *scaleRate     `json:"rate,omitempty"`
}

// writeJSON prints the report as JSON.
func (rep *scaleReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// growth is the ratio of a column between the rows of N = 2 and the
// largest N (0 when either is missing).
func (rep *scaleReport) growth(col func(scaleRow) float64) (float64, int) {
	var two, last *scaleRow
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Nodes == 2 {
			two = r
		}
		if last == nil || r.Nodes > last.Nodes {
			last = r
		}
	}
	if two == nil || last == nil || last.Nodes <= 2 || col(*two) == 0 {
		return 0, 0
	}
	return col(*last) / col(*two), last.Nodes
}

// writeText prints the tables and the verdicts.
func (rep *scaleReport) writeText(w io.Writer) error {
	var b strings.Builder
	offered := "as fast as answered"
	if rep.FloodRate > 0 {
		offered = fmt.Sprintf("offered at %d/s", rep.FloodRate)
	}
	fmt.Fprintf(&b, "hookbench -cluster-scale: %d connections, %s flood (%s) and %s accept per N; one NATS JetStream server (natsdev, sync_interval 2m); "+
		"auth_failures %d; load average %s before, %s after; %s %s/%s, %d CPUs\n\n",
		rep.Connections, fmtSeconds(rep.Duration), offered, fmtSeconds(rep.Duration), rep.Limit, rep.LoadBefore, rep.LoadAfter,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	b.WriteString("lockout under a distributed wrong-token flood (every request from another address), and the bound\n")
	fmt.Fprintf(&b, "%4s %8s %11s %10s %10s %10s %11s %9s %10s  %-12s %s\n", "N", "fail/s", "msgs/node/f", "cpu/node/f", "cpu/all/f",
		"alone/f", "share/node/f", "NATS B/f", "NATS cpu/f", "bound (3×)", "≤ limit+2N")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "%4d %8.0f %11.4f %10s %10s %10s %11s %9.1f %10s  %-12s %s\n", r.Nodes, r.FailRPS, r.MsgsPerNodePerF,
			fmtUs(r.CPUPerNodePerFus), fmtUs(r.CPUAllPerFus), fmtUs(r.AloneCPUPerFus), fmtUs(r.ShareCPUPerNodeus), r.NATSBytesPerF,
			fmtUs(r.NATSCPUPerFus), boundText(r), boundVerdict(r))
	}
	b.WriteString("\naccepted events (wake, spool cluster, every request with its own Idempotency-Key)\n")
	fmt.Fprintf(&b, "%4s %9s %9s %8s %11s %10s %11s %9s %9s %8s %10s\n", "N", "accept/s", "per node", "p99", "cpu/node/a", "cpu/all/a",
		"NATS cpu/a", "KV ops/a", "JS API/a", "queue/a", "idle/node")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, "%4d %9.0f %9.0f %8s %11s %10s %11s %9.2f %9.2f %8.2f %10s\n", r.Nodes, r.AcceptRPS, r.AcceptRPS/float64(r.Nodes),
			fmtMs(r.AcceptP99ms), fmtUs(r.CPUPerNodePerAus), fmtUs(r.CPUAllPerAus), fmtUs(r.NATSCPUPerAus), r.KVOpsPerAccept,
			r.JSAPIPerAccept, r.QueuePubPerAccept, fmt.Sprintf("%.1fms/s", r.IdleCPUms))
	}
	b.WriteString("\n")
	for _, c := range []struct {
		name string
		col  func(scaleRow) float64
	}{
		{"messages received per node per cluster-wide failure", func(r scaleRow) float64 { return r.MsgsPerNodePerF }},
		{"CPU per node per cluster-wide failure", func(r scaleRow) float64 { return r.CPUPerNodePerFus }},
		{"sharing CPU per node per cluster-wide failure", func(r scaleRow) float64 { return r.ShareCPUPerNodeus }},
		{"CPU of all nodes per failure", func(r scaleRow) float64 { return r.CPUAllPerFus }},
		{"NATS bytes per failure", func(r scaleRow) float64 { return r.NATSBytesPerF }},
		{"CPU of all nodes per accepted event", func(r scaleRow) float64 { return r.CPUAllPerAus }},
	} {
		if g, last := rep.growth(c.col); g > 0 {
			verdict := ""
			if strings.HasPrefix(c.name, "messages") || strings.HasPrefix(c.name, "CPU per node") || strings.HasPrefix(c.name, "sharing") {
				verdict = " (target ≤ 1.5×) " + passFail(g <= 1.5)
			}
			fmt.Fprintf(&b, "%s: N=%d is %.2f× N=2%s\n", c.name, last, g, verdict)
		}
	}
	if d := rep.Delivery; d != nil {
		if d.Error != "" {
			fmt.Fprintf(&b, "delivery lanes (%d delivery nodes): %s\n", d.Nodes, d.Error)
		} else {
			ratio := d.WakeRate / d.AgentRate
			fmt.Fprintf(&b, "delivery lanes (%d delivery nodes, backlog of %d wake + %d agent events): wake %.0f/s, agent %.0f/s: wake = %.2f× agent (target ≥ 0.5) %s\n",
				d.Nodes, d.Wake, d.Agent, d.WakeRate, d.AgentRate, ratio, passFail(ratio >= 0.5))
		}
	}
	if r := rep.Rate; r != nil {
		if r.Error != "" {
			fmt.Fprintf(&b, "rate %s over %d delivery nodes: %s\n", r.Rate, r.Nodes, r.Error)
		} else {
			ratio := r.Measured / r.Want
			fmt.Fprintf(&b, "rate %s over %d delivery nodes: %.1f/s at the gateway over %.1fs = %.2f× (target within 10%%) %s\n",
				r.Rate, r.Nodes, r.Measured, r.Window, ratio, passFail(ratio >= 0.9 && ratio <= 1.1))
		}
	}
	b.WriteString(`
msgs/node/f: messages NATS delivered to a node (all its subscriptions), averaged over the nodes,
  per failure anywhere in the cluster; cpu/node/f: a node's CPU per cluster-wide failure (its own
  requests included); cpu/all/f: all nodes' CPU per failure; alone/f: the same flood on N nodes
  without a cluster; share/node/f: (cpu/all/f - alone/f) / N, what sharing the lockout costs a
  node per cluster-wide failure; NATS B/f: bytes into and out of NATS per failure; bound: guesses
  answered 401 cluster-wide, one address guessing on every node at once as fast as it can, until
  every node lists it as locked (3 trials; -1: no lock within 30s).
accept: cpu/.../a per accepted event; KV ops: idempotency and lock bucket writes and reads per
  event; JS API: JetStream API requests per event; queue: publishes to the queue stream per event;
  idle/node: a node's CPU per second with no load (heartbeats, probes, timers).
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// boundText lists the bound's trials.
func boundText(r scaleRow) string {
	parts := make([]string, len(r.Bounds))
	for i, v := range r.Bounds {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, " ")
}

// boundVerdict compares the worst trial with limit + 2N.
func boundVerdict(r scaleRow) string {
	return fmt.Sprintf("%d %s", r.BoundAllowed, passFail(r.Bound >= 0 && r.Bound <= r.BoundAllowed))
}

// passFail is PASS or FAIL.
func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// fmtUs prints microseconds.
func fmtUs(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0fµs", v)
	}
	return fmt.Sprintf("%.1fµs", v)
}
