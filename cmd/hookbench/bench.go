package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// bench is one hookbench run: the ingress, the sink and the rows.
type bench struct {
	o        options
	env      *benchEnv
	bin      string
	rows     []rowDef          // rows that run
	skipped  map[string]string // row id → why it does not run
	specs    map[string]*loadSpec
	results  map[string]*result
	rss      map[string]int64 // row id → highest ingress RSS seen while it ran
	accepted uint64           // expected answers of sink-bound rows, warm-up included
	in       *ingress
	sink     *sinkProc
	// listeners are the rows' sockets, handed to Caddy
	listeners []net.Listener
	// nats are the NATS servers of the cluster rows, by count and sync
	nats     map[natsKey]*natsServers
	clock    cpuClock
	spread   spreadAddrs
	fwd      atomic.Uint64
	keys     atomic.Uint64 // the signed rows' Idempotency-Key values
	progress io.Writer
	watched  watchReport // what the console and cluster tail of row (w) did
}

// run performs a whole hookbench run and writes the report to out.
func run(ctx context.Context, o options, out io.Writer) error {
	rows, err := selectRows(o.rows)
	if err != nil {
		return err
	}
	if o.rss > 0 {
		rows, _ = selectRows("c")
	}
	rows = withBases(rows)
	if _, ok := findRow(rows, o.pprofRow); o.pprofRow != "" && !ok {
		return fmt.Errorf("-pprof %s: the row is not among the selected rows", o.pprofRow)
	}
	dir, err := os.MkdirTemp("", "hookbench")
	if err != nil {
		return err
	}
	b := &bench{o: o, rows: rows, skipped: map[string]string{}, specs: map[string]*loadSpec{},
		results: map[string]*result{}, rss: map[string]int64{}, progress: os.Stderr}
	if o.keep {
		defer fmt.Fprintf(b.progress, "work directory kept: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	defer func() {
		for _, ln := range b.listeners {
			ln.Close()
		}
		for _, ns := range b.nats {
			ns.stop()
		}
	}()
	if err := b.setup(dir); err != nil {
		return err
	}
	defer b.sink.stop()
	defer b.in.stop()
	if o.rss > 0 {
		rep, err := b.measureRSS(ctx)
		if err != nil {
			return err
		}
		return writeRSSReport(out, o, rep)
	}
	if err := b.measure(ctx); err != nil {
		return err
	}
	rep := b.report()
	if o.pprofRow != "" {
		if rep.Profile, err = b.profile(ctx, o.pprofRow); err != nil {
			fmt.Fprintf(b.progress, "hookbench: no profile: %v\n", err)
		}
	}
	rep.Sink = b.checkSink()
	if o.jsonOut {
		return rep.writeJSON(out)
	}
	return rep.writeText(out)
}

// withBases adds the rows the ratios of rows are taken against, the rows
// their twins are, and the signed rows' token twin.
func withBases(rows []rowDef) []rowDef {
	all := rowCatalogue()
	rows = slices.Clone(rows)
	want := map[string]bool{}
	for i := 0; i < len(rows); i++ {
		r := rows[i]
		want[r.id] = true
		if r.twinOf != "" && !want[r.twinOf] {
			tw, _ := findRow(all, r.twinOf)
			rows = append(rows, tw) // its twin, and the twin's bases
		}
		if r.signed != "" && r.signed != "token" && !want[tokenTwin] {
			tw, _ := findRow(all, tokenTwin)
			rows = append(rows, tw) // what its signature's cost is taken above
		}
		for base := r.base; !want[base]; {
			want[base] = true
			br, _ := findRow(all, base)
			base = br.base
		}
	}
	var out []rowDef
	for _, r := range all {
		if want[r.id] {
			out = append(out, r)
		}
	}
	return out
}

// setup builds or finds Caddy, probes the optional rows, and starts the
// sink and the ingress.
func (b *bench) setup(dir string) error {
	b.bin = b.o.caddy
	if b.bin == "" {
		fmt.Fprintln(b.progress, "building ./cmd/caddy …")
		var err error
		if b.bin, err = buildCaddy(dir); err != nil {
			return err
		}
	}
	b.env = &benchEnv{dir: dir, sink: filepath.Join(dir, "sink.sock"), admin: filepath.Join(dir, "admin.sock"),
		token: randomToken(), gwToken: randomToken(), clusterKey: randomToken(), ports: map[string]int{}, fds: map[string]int{},
		accessLog: b.o.accessLog, forwarded: b.o.spread == "xff"}
	signers, serr := newSigners(b.env.token)
	if serr != nil {
		return serr
	}
	b.env.signers = signers
	if err := b.env.writeFiles(); err != nil {
		return err
	}
	if err := b.startNATS(dir); err != nil {
		return err
	}
	var run []rowDef
	for _, r := range b.rows {
		if r.probe {
			if why := b.env.probe(b.bin, r); why != "" {
				b.skipped[r.id] = why
				continue
			}
		}
		run = append(run, r)
	}
	b.rows = run
	// hookbench holds every row's listening socket for the whole run and
	// hands them to Caddy, so no other program can take a port meanwhile
	files := make([]*os.File, len(b.rows))
	for i, r := range b.rows {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		b.listeners = append(b.listeners, ln)
		if files[i], err = ln.(*net.TCPListener).File(); err != nil {
			return err
		}
		defer files[i].Close()
		b.env.ports[r.id] = ln.Addr().(*net.TCPAddr).Port
		b.env.fds[r.id] = 3 + i // ExtraFiles[i]
	}
	cfPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfPath, []byte(b.env.caddyfile(b.rows)), 0o600); err != nil {
		return err
	}
	var err error
	if b.sink, err = startSink(b.env.sink); err != nil {
		return err
	}
	for _, r := range b.rows {
		b.specs[r.id] = b.spec(r)
		b.results[r.id] = new(result)
	}
	if b.in, err = startIngress(b.bin, cfPath, b.env.admin, files); err != nil {
		b.sink.stop()
		return err
	}
	b.clock = cpuClock{ingress: b.in.pid(), sink: b.sink.cmd.Process.Pid}
	return nil
}

// startNATS starts the NATS servers the cluster rows reach (in this
// process: they compete for the CPU with the load, as a NATS server on
// the ingress's host would with Caddy).
func (b *bench) startNATS(dir string) error {
	b.nats, b.env.natsURLs = map[natsKey]*natsServers{}, map[natsKey]string{}
	for _, r := range b.rows {
		k := r.natsSet()
		if r.nats == 0 || b.nats[k] != nil {
			continue
		}
		sync := "lazily (NATS's default sync_interval, 2m)"
		if k.always {
			sync = "every write (sync_interval always)"
		}
		fmt.Fprintf(b.progress, "starting %d NATS JetStream server(s), syncing %s …\n", r.nats, sync)
		ns, err := startNATS(dir, k)
		if err != nil {
			return fmt.Errorf("row %s: NATS: %w", r.id, err)
		}
		b.nats[k], b.env.natsURLs[k] = ns, ns.urls()
	}
	return nil
}

// spec builds the load of row r.
func (b *bench) spec(r rowDef) *loadSpec {
	token := b.env.token
	if r.badToken {
		token = wrongToken(token)
	}
	s := &loadSpec{addr: b.env.hostFor(r.id), expect: r.expect, source: r.source, spread: &b.spread, fwd: &b.fwd,
		perAddr: defaultAuthFailures - 1}
	if s.source == srcSpread && b.env.forwarded && !r.bindOnly {
		s.source = srcForwarded
	}
	if r.signed != "" {
		// signed when the run starts (the rows' replay window is an hour)
		var err error
		if s.request, s.keyAt, err = b.env.signers.signedRequest(r, s.addr, time.Now()); err != nil {
			panic(err) // only for a row naming a provider signedHeaders does not know
		}
		s.keys = &b.keys
		return s
	}
	s.request, s.xffAt = buildRequest(r, s.addr, token, s.source == srcForwarded)
	if s.source == srcSpread {
		s.lastRequest = closingRequest(r, s.addr, token)
	}
	return s
}

// defaultAuthFailures is the ingress's lockout threshold (failures per
// window); row (e) stays below it per address.
const defaultAuthFailures = 20

// measure warms every row up, then runs the rounds.
func (b *bench) measure(ctx context.Context) error {
	if b.o.warmup > 0 {
		fmt.Fprintf(b.progress, "warm-up %s per row …\n", b.o.warmup)
		for _, r := range b.rows {
			if err := b.segment(ctx, r, b.o.warmup, nil); err != nil {
				return err
			}
		}
	}
	seg := b.o.duration / time.Duration(b.o.rounds)
	for round := 1; round <= b.o.rounds; round++ {
		fmt.Fprintf(b.progress, "round %d/%d:", round, b.o.rounds)
		for _, r := range roundOrder(b.rows, round) {
			fmt.Fprintf(b.progress, " %s", r.id)
			if err := b.segment(ctx, r, seg, b.results[r.id]); err != nil {
				fmt.Fprintln(b.progress)
				return err
			}
		}
		fmt.Fprintln(b.progress)
	}
	return nil
}

// roundOrder is the order of the rows in round (1-based): rotated by one
// row per round, so that no row always runs first or last (a row right
// after a given other one measured consistently a few per cent lower).
func roundOrder(rows []rowDef, round int) []rowDef {
	if len(rows) == 0 {
		return rows
	}
	k := (round - 1) % len(rows)
	return append(append(make([]rowDef, 0, len(rows)), rows[k:]...), rows[:k]...)
}

// segment runs row r for d, sampling the ingress RSS, and merges the
// measurement into the result into (nil: discard it).
func (b *bench) segment(ctx context.Context, r rowDef, d time.Duration, into *result) error {
	if r.source == srcLocked {
		if err := b.lockOut(r); err != nil {
			return err
		}
	}
	stopWatch := func() {}
	if r.watched {
		stopWatch = watch(b.env.admin, &b.watched)
	}
	sampler := b.sampleRSS(200 * time.Millisecond)
	cpu0 := b.clock.read()
	res := runLoad(ctx, b.specs[r.id], b.o.conns, d)
	res.cpu = b.clock.read().sub(cpu0)
	stopWatch()
	b.rss[r.id] = max(b.rss[r.id], sampler.stop().max)
	if r.sinkBound {
		b.accepted += res.statuses[r.expect]
	}
	if into != nil {
		into.merge(res)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-b.in.exited:
		return fmt.Errorf("caddy exited during row (%s):\n%s", r.id, tail(b.in.logPath, 20))
	default:
	}
	return nil
}

// lockOut makes sure lockedAddr is locked out on row r's site: it sends
// wrong-token requests from that address until one is answered 429.
func (b *bench) lockOut(r rowDef) error {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: lockedAddr.AsSlice()}}
	conn, err := d.Dial("tcp", b.env.hostFor(r.id))
	if err != nil {
		return fmt.Errorf("row (%s): %w", r.id, err)
	}
	defer func() {
		_ = conn.(*net.TCPConn).SetLinger(0) // no TIME_WAIT on an ephemeral port
		conn.Close()
	}()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	req := b.specs[r.id].request
	for range 4 * defaultAuthFailures {
		if _, err := conn.Write(req); err != nil {
			return fmt.Errorf("row (%s): locking %s: %w", r.id, lockedAddr, err)
		}
		resp, err := readResponse(br)
		if err != nil {
			return fmt.Errorf("row (%s): locking %s: %w", r.id, lockedAddr, err)
		}
		if resp.status == http.StatusTooManyRequests {
			return nil
		}
	}
	return fmt.Errorf("row (%s): %s is not locked out after %d failures", r.id, lockedAddr, 4*defaultAuthFailures)
}

// checkSink compares what the sink received with the successes of the
// sink-bound rows, waiting up to 15 s for spooled deliveries.
func (b *bench) checkSink() *sinkReport {
	rep := &sinkReport{Expected: b.accepted}
	end := time.Now().Add(15 * time.Second)
	for {
		c, err := b.sink.counts()
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		rep.Received = uint64(c.Wake + c.Agent)
		if rep.Received >= rep.Expected || time.Now().After(end) {
			return rep
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// profile runs row id alone for -d while taking a CPU profile of the
// ingress through its admin endpoint.
func (b *bench) profile(ctx context.Context, id string) (*profileReport, error) {
	r, ok := findRow(b.rows, id)
	if !ok {
		return nil, fmt.Errorf("row %q does not run in this build or selection", id)
	}
	out := b.o.pprofOut
	if out == "" {
		out = "hookbench-" + id + ".pprof"
	}
	secs := max(1, int(b.o.duration.Seconds()))
	fmt.Fprintf(b.progress, "profiling the ingress for %ds during row (%s) …\n", secs, id)
	var wg sync.WaitGroup
	var perr error
	wg.Go(func() {
		time.Sleep(300 * time.Millisecond) // let the load reach steady state
		perr = b.in.cpuProfile(ctx, secs, out)
	})
	res := new(result)
	err := b.segment(ctx, r, time.Duration(secs)*time.Second+time.Second, res)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	return &profileReport{Row: id, File: out, RPS: res.rps()}, nil
}

// rssSampler records the ingress RSS periodically until stopped.
type rssSampler struct {
	done    chan struct{}
	stopped chan struct{}
	samples []int64
	max     int64
}

// sampleRSS starts sampling the ingress RSS every interval.
func (b *bench) sampleRSS(interval time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if v, err := b.in.rss(); err == nil {
					s.samples = append(s.samples, v)
					s.max = max(s.max, v)
				}
			}
		}
	}()
	return s
}

// stop ends sampling and returns the sampler with its samples.
func (s *rssSampler) stop() *rssSampler {
	close(s.done)
	<-s.stopped
	return s
}

// randomToken returns 64 random hex characters.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
