// Command hookbench measures the caddyhook ingress side by side with the
// ceilings Caddy itself sets on the same machine, in one run.
//
// It builds ./cmd/caddy (or takes -caddy), starts a gateway sink on a Unix
// socket (internal/devgw in its lean mode, in a child process) and one
// Caddy with a site per row on its own loopback port, then drives the rows
// from an in-process generator with keep-alive connections, interleaved
// in rounds (each round's order rotated by one row) so machine drift and
// position cancel out:
//
//	a  respond                      the static ceiling
//	b  reverse_proxy to the sink    the forwarding ceiling
//	c  hooks wake, sync             ratio to b, target ≥ 1.0
//	d  hooks agent + policy         ratio to b, target ≥ 0.9
//	e  401 flood, many addresses    ratio to a, target ≥ 0.9
//	f  429 flood, locked address    ratio to a, target ≥ 0.9
//	g  mapping: templates + CEL     ratio to b, target ≥ 0.8
//	h  mapping: TS transform        ratio to b, target ≥ 0.5
//	i  spool (durable accept)       ratio to c, target ≥ 0.5, p99 < 25 ms
//	j  respond with e's churn       a new connection every 19 requests, as e
//	                                pays: what e costs beyond that churn
//	k  hooks wake, forward mode     ratio to c, target ≥ 1.0
//	l  spool cluster, 1-node NATS   ratio to i, target ≥ 0.5, p99 < 25 ms
//	m  spool cluster, R3            ratio to i, target ≥ 0.5, p99 < 25 ms
//	n  e with cluster on            ratio to e, target ≥ 0.9
//	o  f with cluster on            ratio to f, target ≥ 0.9
//	p  m, NATS syncing every write  ratio to m: what sync_interval always costs
//	q  (c) with the event log off   (c) must be ≥ 0.95 × (q)
//	r  (e) with the event log off   (e) must be ≥ 0.95 × (r)
//	s  (l) with a console open and  ratio to l, target ≥ 0.95: what the
//	   a cluster tail attached      cluster view costs the request path
//
// Rows whose directives this build does not accept yet are skipped.
//
// Usage:
//
//	go run ./cmd/hookbench [-c 32] [-d 10s] [-rounds 5] [-rows a,b,c] [-json]
//	go run ./cmd/hookbench -rss 60s
//	go run ./cmd/hookbench -rows c -pprof c
//
// With -cluster-scale it measures instead how cluster mode's cost grows
// with the number of nodes (see scale.go):
//
//	go run ./cmd/hookbench -cluster-scale [-nodes 1,2,4,8,16] [-d 4s] [-c 32] [-flood-rate 4000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// options are the command-line flags.
type options struct {
	conns      int
	duration   time.Duration // per row, over all rounds
	rounds     int
	warmup     time.Duration // per row, before the first round
	rows       string
	jsonOut    bool
	caddy      string
	pprofRow   string
	pprofOut   string
	keep       bool
	accessLog  bool
	rss        time.Duration
	spread     string
	sinkListen string
	scale      bool
	scaleNodes []int
	floodRate  int
}

// parseFlags parses args into options.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("hookbench", flag.ContinueOnError)
	fs.IntVar(&o.conns, "c", 32, "keep-alive connections per row")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "measured time per row, split over the rounds")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaving rounds: each row runs d/rounds per round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load per row before the first round")
	fs.StringVar(&o.rows, "rows", "all", "rows to run, e.g. a,b,c (ratio bases are added)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.caddy, "caddy", "", "Caddy binary with caddyhook (default: build ./cmd/caddy)")
	fs.StringVar(&o.pprofRow, "pprof", "", "after the table, profile the ingress (CPU) while this row runs for -d")
	fs.StringVar(&o.pprofOut, "pprof-out", "", "CPU profile file (default hookbench-<row>.pprof)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (Caddyfile, logs, spool)")
	fs.BoolVar(&o.accessLog, "log", false, "give every site an access log (encoded, written to discard)")
	fs.DurationVar(&o.rss, "rss", 0, "instead of the table, run row c alone this long, three times, and report the ingress RSS")
	fs.StringVar(&o.spread, "spread", "bind", "row e's many addresses: bind (a fresh 127/8 source address every 19 requests) or xff (X-Forwarded-For from a trusted proxy)")
	fs.StringVar(&o.sinkListen, "sink-listen", "", "internal: run as the gateway sink on this Unix socket")
	fs.BoolVar(&o.scale, "cluster-scale", false, "instead of the rows, measure cluster mode's cost against the number of nodes")
	nodes := fs.String("nodes", "1,2,4,8,16", "-cluster-scale: the node counts to measure")
	fs.IntVar(&o.floodRate, "flood-rate", 4000, "-cluster-scale: the flood's offered rate, requests per second cluster-wide (0: as fast as the nodes answer)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.scale {
		if o.floodRate < 0 {
			return o, fmt.Errorf("-flood-rate %d: want 0 or more", o.floodRate)
		}
		var err error
		if o.scaleNodes, err = parseNodeCounts(*nodes); err != nil {
			return o, err
		}
		if !flagSet(fs, "d") {
			o.duration = 4 * time.Second
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.conns < 1 || o.conns > 4096:
		return o, fmt.Errorf("-c %d: want 1 to 4096", o.conns)
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	case o.duration < time.Duration(o.rounds)*100*time.Millisecond:
		return o, fmt.Errorf("-d %s: want at least 100ms per round", o.duration)
	case o.warmup < 0 || o.rss < 0:
		return o, fmt.Errorf("-warmup and -rss must not be negative")
	case o.spread != "bind" && o.spread != "xff":
		return o, fmt.Errorf("-spread %q: want bind or xff", o.spread)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		os.Exit(2)
	}
	switch {
	case o.sinkListen != "":
		err = serveSink(o.sinkListen)
	case o.scale:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = runScale(ctx, o, os.Stdout)
		stop()
	default:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err = run(ctx, o, os.Stdout)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		os.Exit(1)
	}
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseNodeCounts reads -nodes: increasing counts from 1 to 64.
func parseNodeCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("-nodes %q: want node counts from 1 to 64, e.g. 1,2,4,8,16", s)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("-nodes %q: want increasing counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}
