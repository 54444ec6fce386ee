package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// The cluster-scale harness (-cluster-scale) measures how cluster mode's
// cost grows with the number of nodes: for each N it starts N edges
// (Caddy processes, lockout shared through one NATS JetStream server, an
// accepting `spool cluster`), then drives
//
//   - a distributed wrong-token flood: every request from another
//     X-Forwarded-For address, so every failure is shared and none locks;
//   - the bound: one address guessing as fast as it can on every node at
//     once, counting the guesses answered 401 until every node lists the
//     address as locked;
//   - an accepted-event load: valid wake events, each with its own
//     Idempotency-Key (the worst case for the KV buckets).
//
// It reads each node's CPU from /proc, and NATS's traffic per connection
// from its monitoring endpoint, so every number is a count or a ratio
// (CPU time, messages, bytes per event), meaningful on a loaded machine.
// Then, once: the delivery lanes (a backlog of wake and agent events
// drained by three delivery nodes) and the cluster-wide `rate` (three
// delivery nodes sharing one rate), both measured at the gateway sink.

// scaleRun is one -cluster-scale run.
type scaleRun struct {
	o        options
	ctx      context.Context
	dir      string
	bin      string
	nats     *natsProc
	sink     *sinkProc
	token    string
	gwToken  string
	key      string
	keys     atomic.Uint64 // Idempotency-Key values
	fwd      atomic.Uint64 // X-Forwarded-For addresses of the flood
	progress io.Writer
}

// scaleRow is what one N measured.
type scaleRow struct {
	Nodes int `json:"nodes"`
	// flood
	Failures          uint64  `json:"failures"`
	FailRPS           float64 `json:"failures_per_s"`
	MsgsPerNodePerF   float64 `json:"msgs_received_per_node_per_failure"`
	CPUPerNodePerFus  float64 `json:"cpu_us_per_node_per_failure"`
	CPUAllPerFus      float64 `json:"cpu_us_all_nodes_per_failure"`
	AloneCPUPerFus    float64 `json:"cpu_us_all_nodes_per_failure_alone"`
	ShareCPUPerNodeus float64 `json:"sharing_cpu_us_per_node_per_failure"`
	IdleCPUms         float64 `json:"idle_cpu_ms_per_s_per_node"`
	NATSBytesPerF     float64 `json:"nats_bytes_per_failure"`
	NATSCPUPerFus     float64 `json:"nats_cpu_us_per_failure"`
	FloodOther        uint64  `json:"flood_other_answers"`
	Bounds            []int   `json:"bounds"`
	Bound             int     `json:"bound"`
	BoundAllowed      int     `json:"bound_allowed"`
	AcceptRPS         float64 `json:"accepts_per_s"`
	AcceptP99ms       float64 `json:"accept_p99_ms"`
	CPUPerNodePerAus  float64 `json:"cpu_us_per_node_per_accept"`
	CPUAllPerAus      float64 `json:"cpu_us_all_nodes_per_accept"`
	NATSCPUPerAus     float64 `json:"nats_cpu_us_per_accept"`
	KVOpsPerAccept    float64 `json:"kv_ops_per_accept"`
	JSAPIPerAccept    float64 `json:"js_api_requests_per_accept"`
	QueuePubPerAccept float64 `json:"queue_publishes_per_accept"`
	AcceptOther       uint64  `json:"accept_other_answers"`
}

// scaleDelivery is the delivery lanes' drain, measured at the sink.
type scaleDelivery struct {
	Nodes     int     `json:"nodes"`
	Wake      int     `json:"wake"`
	Agent     int     `json:"agent"`
	WakeRate  float64 `json:"wake_per_s"`
	AgentRate float64 `json:"agent_per_s"`
	Error     string  `json:"error,omitempty"`
}

// scaleRate is the cluster-wide rate measured at the sink.
type scaleRate struct {
	Nodes    int     `json:"nodes"`
	Rate     string  `json:"rate"`
	Want     float64 `json:"want_per_s"`
	Measured float64 `json:"measured_per_s"`
	Window   float64 `json:"window_s"`
	Error    string  `json:"error,omitempty"`
}

// scaleSettle is how long a fresh set of nodes runs before it is measured
// (heartbeats, consumers and watchers established).
const scaleSettle = 2 * time.Second

// runScale performs a -cluster-scale run and writes its tables to out.
func runScale(ctx context.Context, o options, out io.Writer) error {
	dir, err := os.MkdirTemp("", "hookbench-scale")
	if err != nil {
		return err
	}
	s := &scaleRun{o: o, ctx: ctx, dir: dir, token: randomToken(), gwToken: randomToken(), key: randomToken(), progress: os.Stderr}
	if o.keep {
		defer fmt.Fprintf(s.progress, "work directory kept: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	load0 := loadAverage()
	s.bin = o.caddy
	if s.bin == "" {
		fmt.Fprintln(s.progress, "building ./cmd/caddy …")
		if s.bin, err = buildCaddy(dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.progress, "building ./cmd/natsdev …")
	natsBin, err := buildNatsdev(dir)
	if err != nil {
		return err
	}
	if s.nats, err = startNatsProc(natsBin, dir); err != nil {
		return err
	}
	defer s.nats.stop()
	if s.sink, err = startSink(filepath.Join(dir, "sink.sock")); err != nil {
		return err
	}
	defer s.sink.stop()

	rep := &scaleReport{Connections: o.conns, FloodRate: o.floodRate, Duration: o.duration.Seconds(), Limit: scaleLimit, LoadBefore: load0}
	for _, n := range o.scaleNodes {
		fmt.Fprintf(s.progress, "N=%d:", n)
		row, err := s.measureNodes(n)
		fmt.Fprintln(s.progress)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		rep.Rows = append(rep.Rows, row)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.progress, "delivery lanes …")
	rep.Delivery = s.measureDelivery(3)
	fmt.Fprintln(s.progress, "cluster-wide rate …")
	rep.Rate = s.measureRate(3, 100)
	rep.LoadAfter = loadAverage()
	if o.jsonOut {
		return rep.writeJSON(out)
	}
	return rep.writeText(out)
}

// measureNodes runs the flood, the bound and the accept load on n edges.
func (s *scaleRun) measureNodes(n int) (scaleRow, error) {
	row := scaleRow{Nodes: n, BoundAllowed: scaleLimit + 2*n}
	ns := fmt.Sprintf("scale%d", n)
	nodes, err := s.startRole(ns, ns, n, roleEdge, "")
	if err != nil {
		return row, err
	}
	defer stopScaleNodes(nodes)
	idle0 := cpuOf(nodes)
	time.Sleep(scaleSettle)
	row.IdleCPUms = float64(cpuSince(nodes, idle0)) / float64(time.Millisecond) / scaleSettle.Seconds() / float64(n)
	fmt.Fprint(s.progress, " flood")
	if err := s.flood(nodes, ns, &row); err != nil {
		return row, err
	}
	fmt.Fprint(s.progress, " alone")
	if row.AloneCPUPerFus, err = s.floodAlone(n); err != nil {
		return row, err
	}
	row.ShareCPUPerNodeus = (row.CPUAllPerFus - row.AloneCPUPerFus) / float64(n)
	fmt.Fprint(s.progress, " bound")
	for trial := range 3 {
		row.Bounds = append(row.Bounds, s.bound(nodes, fmt.Sprintf("10.250.%d.%d", n, trial+1)))
	}
	for _, b := range row.Bounds {
		if b < 0 || row.Bound < 0 {
			row.Bound = -1
		} else {
			row.Bound = max(row.Bound, b)
		}
	}
	fmt.Fprint(s.progress, " accept")
	return row, s.accept(nodes, ns, &row)
}

// startRole starts n nodes of role (delivering at rate) in namespace ns,
// their files under dir/<sub>.
func (s *scaleRun) startRole(ns, sub string, n int, role scaleNodeRole, rate string) ([]*scaleNode, error) {
	return startScaleNodes(s.bin, filepath.Join(s.dir, sub), n, func(_, port int) scaleNodeConfig {
		return s.nodeConfig(ns, port, role, rate)
	})
}

// nodeConfig is the config of a node of namespace ns on port.
func (s *scaleRun) nodeConfig(ns string, port int, role scaleNodeRole, rate string) scaleNodeConfig {
	return scaleNodeConfig{port: port, token: s.token, gwToken: s.gwToken, sink: s.sink.path, natsURL: s.nats.client,
		namespace: ns, key: s.key, role: role, rate: rate}
}

// cpuOf reads the CPU time of every node.
func cpuOf(nodes []*scaleNode) []time.Duration {
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		out[i], _ = procCPU(n.pid())
	}
	return out
}

// cpuSince sums the CPU time every node used since before.
func cpuSince(nodes []*scaleNode, before []time.Duration) time.Duration {
	var d time.Duration
	for i, t := range cpuOf(nodes) {
		d += t - before[i]
	}
	return d
}

// parallelLoad drives spec(i) on every node at once with the run's
// connections split between them, for d, and merges the results.
func (s *scaleRun) parallelLoad(nodes []*scaleNode, d time.Duration, spec func(i int) *loadSpec) *result {
	per := max(1, s.o.conns/len(nodes))
	results := make([]*result, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			results[i] = runLoad(s.ctx, spec(i), per, d)
		})
	}
	wg.Wait()
	total := new(result)
	var elapsed time.Duration
	for _, r := range results {
		elapsed = max(elapsed, r.elapsed)
		total.merge(r)
	}
	total.elapsed = elapsed
	return total
}

// flood drives the distributed wrong-token flood and fills the lockout
// columns of row.
func (s *scaleRun) flood(nodes []*scaleNode, ns string, row *scaleRow) error {
	prefix := "caddyhook " + ns + " "
	tr0, err := s.nats.connz(prefix)
	if err != nil {
		return err
	}
	cpu0, nats0 := cpuOf(nodes), natsCPU(s.nats)
	res := s.parallelLoad(nodes, s.o.duration, func(i int) *loadSpec {
		return s.floodSpec(nodes[i], len(nodes))
	})
	cpu, natsUsed := cpuSince(nodes, cpu0), natsCPU(s.nats)-nats0
	tr1, err := s.nats.connz(prefix)
	if err != nil {
		return err
	}
	tr, conns := trafficDelta(tr0, tr1)
	f := res.statuses[http.StatusUnauthorized]
	row.Failures, row.FloodOther = f, res.requests-f+res.netErrs
	if f == 0 {
		return fmt.Errorf("flood: no request answered 401 (statuses %v)", nonZero(res.statuses[:]))
	}
	n, fl := float64(len(nodes)), float64(f)
	row.FailRPS = fl / res.elapsed.Seconds()
	row.MsgsPerNodePerF = float64(tr.outMsgs) / float64(max(conns, 1)) / fl
	row.CPUAllPerFus = us(cpu) / fl
	row.CPUPerNodePerFus = row.CPUAllPerFus / n
	row.NATSBytesPerF = float64(tr.inBytes+tr.outBytes) / fl
	row.NATSCPUPerFus = us(natsUsed) / fl
	return nil
}

// floodAlone drives the same flood on n nodes without a cluster and
// returns their CPU per failure: what serving the flood costs them, so
// that the flood's CPU with the cluster, minus this, is what sharing the
// lockout costs (process count, scheduling and idle work included in
// both).
func (s *scaleRun) floodAlone(n int) (float64, error) {
	ns := fmt.Sprintf("alone%d", n)
	nodes, err := s.startRole(ns, ns, n, roleAlone, "")
	if err != nil {
		return 0, err
	}
	defer stopScaleNodes(nodes)
	time.Sleep(scaleSettle / 2)
	cpu0 := cpuOf(nodes)
	res := s.parallelLoad(nodes, s.o.duration, func(i int) *loadSpec {
		return s.floodSpec(nodes[i], len(nodes))
	})
	cpu := cpuSince(nodes, cpu0)
	f := res.statuses[http.StatusUnauthorized]
	if f == 0 {
		return 0, fmt.Errorf("flood without a cluster: no request answered 401 (statuses %v)", nonZero(res.statuses[:]))
	}
	return us(cpu) / float64(f), nil
}

// floodSpec is the flood's load on node n of nodes: wrong tokens, every
// request from another X-Forwarded-For address, the connections paced to
// offer -flood-rate requests per second cluster-wide.
func (s *scaleRun) floodSpec(n *scaleNode, nodes int) *loadSpec {
	sp := &loadSpec{addr: n.addr, expect: http.StatusUnauthorized, source: srcForwarded, fwd: &s.fwd}
	if s.o.floodRate > 0 {
		conns := max(1, s.o.conns/nodes) * nodes
		sp.every = time.Duration(float64(time.Second) * float64(conns) / float64(s.o.floodRate))
	}
	sp.request, sp.xffAt = buildRequest(rowDef{path: "/hooks/wake", body: wakeBody}, n.addr, wrongToken(s.token), true)
	return sp
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// natsCPU reads the NATS server's CPU time.
func natsCPU(p *natsProc) time.Duration {
	t, _ := procCPU(p.cmd.Process.Pid)
	return t
}

// nonZero lists the statuses that occurred, for error messages.
func nonZero(statuses []uint64) map[int]uint64 {
	out := map[int]uint64{}
	for st, c := range statuses {
		if c > 0 {
			out[st] = c
		}
	}
	return out
}

// boundTimeout bounds one trial of the bound.
const boundTimeout = 30 * time.Second

// bound is one trial: addr guesses as fast as it can on every node at
// once (one connection each); each node's connection stops once the
// node lists addr as locked. It returns the guesses answered 401 in all,
// or -1 when some node did not lock within boundTimeout.
func (s *scaleRun) bound(nodes []*scaleNode, addr string) int {
	var evaluated atomic.Int64
	var failed atomic.Bool
	deadline := time.Now().Add(boundTimeout)
	req := []byte("POST /hooks/wake HTTP/1.1\r\nHost: scale\r\nAuthorization: Bearer " + wrongToken(s.token) +
		"\r\nContent-Type: application/json\r\nX-Forwarded-For: " + addr +
		"\r\nContent-Length: " + strconv.Itoa(len(wakeBody)) + "\r\n\r\n" + wakeBody)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if !guessUntilLocked(n, addr, req, deadline, &evaluated) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return -1
	}
	return int(evaluated.Load())
}

// guessUntilLocked sends req on one connection to n until n lists addr
// as locked (checked after answers other than 401, at most every 5 ms),
// counting the 401s; it reports false at the deadline.
func guessUntilLocked(n *scaleNode, addr string, req []byte, deadline time.Time, evaluated *atomic.Int64) bool {
	var conn net.Conn
	var br *bufio.Reader
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var checked time.Time
	for time.Now().Before(deadline) {
		if conn == nil {
			c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			_ = c.SetDeadline(deadline)
			conn, br = c, bufio.NewReader(c)
		}
		if _, err := conn.Write(req); err != nil {
			conn.Close()
			conn = nil
			continue
		}
		resp, err := readResponse(br)
		if err != nil {
			conn.Close()
			conn = nil
			continue
		}
		if resp.status == http.StatusUnauthorized {
			evaluated.Add(1)
			continue
		}
		if time.Since(checked) >= 5*time.Millisecond {
			if n.lockedHere(addr) {
				return true
			}
			checked = time.Now()
		}
		if resp.close {
			conn.Close()
			conn = nil
		}
	}
	return false
}

// keyWidth is the width of the harness's Idempotency-Key values.
const keyWidth = 20

// putDigits writes v as keyWidth decimal digits into dst.
func putDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = '0' + byte(v%10)
		v /= 10
	}
}

// acceptRequest is a valid request of kind (wake or agent) for host, with
// an Idempotency-Key (rewritten per request) when keyed; it returns the
// key's offset (0: none).
func (s *scaleRun) acceptRequest(kind, host string, keyed bool) ([]byte, int) {
	body := wakeBody
	if kind == "agent" {
		body = `{"message":"Deploy finished: build 1234 is green. Summarise the changes for the team.","name":"CI"}`
	}
	b := []byte("POST /hooks/" + kind + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + s.token +
		"\r\nContent-Type: application/json\r\n")
	at := 0
	if keyed {
		b = append(b, "Idempotency-Key: "...)
		at = len(b)
		b = append(b, strings.Repeat("0", keyWidth)+"\r\n"...)
	}
	b = append(b, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body...)
	return b, at
}

// apiCounter counts, through a plain NATS client, the JetStream API
// requests, KV writes and queue publishes of namespace ns.
type apiCounter struct {
	nc                     *nats.Conn
	kv, api, direct, queue atomic.Uint64
}

// countAPI starts counting.
func countAPI(url, ns string) (*apiCounter, error) {
	nc, err := nats.Connect(url, nats.Name("hookbench api counter"))
	if err != nil {
		return nil, err
	}
	c := &apiCounter{nc: nc}
	kvPrefix := "$KV.hooks_" + ns + "_"
	subs := map[string]func(*nats.Msg){
		"$KV.>": func(m *nats.Msg) {
			if strings.HasPrefix(m.Subject, kvPrefix) {
				c.kv.Add(1)
			}
		},
		"$JS.API.>": func(m *nats.Msg) {
			if strings.HasPrefix(m.Subject, "$JS.API.DIRECT.GET.KV_hooks_"+ns+"_") {
				c.direct.Add(1)
			}
			c.api.Add(1)
		},
		"hooks." + ns + ".queue.>": func(*nats.Msg) { c.queue.Add(1) },
	}
	for subj, fn := range subs {
		if _, err := nc.Subscribe(subj, fn); err != nil {
			nc.Close()
			return nil, err
		}
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// stop flushes and closes the counter's connection.
func (c *apiCounter) stop() {
	_ = c.nc.Flush()
	time.Sleep(100 * time.Millisecond) // the last messages in flight
	c.nc.Close()
}

// accept drives valid wake events, each with its own Idempotency-Key,
// and fills the accept columns of row.
func (s *scaleRun) accept(nodes []*scaleNode, ns string, row *scaleRow) error {
	ctr, err := countAPI(s.nats.client, ns)
	if err != nil {
		return err
	}
	cpu0, nats0 := cpuOf(nodes), natsCPU(s.nats)
	res := s.parallelLoad(nodes, s.o.duration, func(i int) *loadSpec {
		sp := &loadSpec{addr: nodes[i].addr, expect: http.StatusOK, keys: &s.keys}
		sp.request, sp.keyAt = s.acceptRequest("wake", nodes[i].addr, true)
		return sp
	})
	cpu, natsUsed := cpuSince(nodes, cpu0), natsCPU(s.nats)-nats0
	ctr.stop()
	a := res.statuses[http.StatusOK]
	row.AcceptOther = res.requests - a + res.netErrs
	if a == 0 {
		return fmt.Errorf("accept: no request answered 200 (statuses %v)", nonZero(res.statuses[:]))
	}
	n, af := float64(len(nodes)), float64(a)
	row.AcceptRPS = af / res.elapsed.Seconds()
	row.AcceptP99ms = ms(res.hist.quantile(0.99))
	row.CPUAllPerAus = us(cpu) / af
	row.CPUPerNodePerAus = row.CPUAllPerAus / n
	row.NATSCPUPerAus = us(natsUsed) / af
	row.KVOpsPerAccept = float64(ctr.kv.Load()+ctr.direct.Load()) / af
	row.JSAPIPerAccept = float64(ctr.api.Load()) / af
	row.QueuePubPerAccept = float64(ctr.queue.Load()) / af
	return nil
}

// fill accepts events of kind through the edge for d (no delivery node
// runs) and returns how many were accepted.
func (s *scaleRun) fill(edge *scaleNode, kind string, d time.Duration) uint64 {
	sp := &loadSpec{addr: edge.addr, expect: http.StatusOK}
	sp.request, _ = s.acceptRequest(kind, edge.addr, false)
	res := runLoad(s.ctx, sp, s.o.conns, d)
	return res.statuses[http.StatusOK]
}

// measureDelivery fills the queue with wake and agent events through one
// edge, then starts n delivery nodes and times each lane's drain at the
// sink, from the first delivery on.
func (s *scaleRun) measureDelivery(n int) *scaleDelivery {
	rep := &scaleDelivery{Nodes: n}
	ns := "scaledeliver"
	edge, err := s.startRole(ns, ns+"-edge", 1, roleEdge, "")
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer stopScaleNodes(edge)
	fill := max(s.o.duration/2, time.Second)
	rep.Wake = int(s.fill(edge[0], "wake", fill))
	rep.Agent = int(s.fill(edge[0], "agent", fill))
	base, err := s.sink.counts()
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	type done struct {
		nodes []*scaleNode
		err   error
	}
	started := make(chan done, 1)
	go func() {
		nodes, err := s.startRole(ns, ns, n, roleDeliver, "")
		started <- done{nodes, err}
	}()
	var first, wakeAt, agentAt time.Time
	end := time.Now().Add(5 * time.Minute)
	for time.Now().Before(end) && (wakeAt.IsZero() || agentAt.IsZero()) {
		c, err := s.sink.counts()
		if err != nil {
			rep.Error = err.Error()
			break
		}
		now := time.Now()
		w, a := c.Wake-base.Wake, c.Agent-base.Agent
		if first.IsZero() && w+a > 0 {
			first = now
		}
		if wakeAt.IsZero() && w >= rep.Wake {
			wakeAt = now
		}
		if agentAt.IsZero() && a >= rep.Agent {
			agentAt = now
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := <-started
	defer stopScaleNodes(d.nodes)
	switch {
	case d.err != nil:
		rep.Error = d.err.Error()
	case wakeAt.IsZero() || agentAt.IsZero():
		rep.Error = "the queue did not drain within 5 minutes"
	default:
		rep.WakeRate = float64(rep.Wake) / max(wakeAt.Sub(first).Seconds(), 0.01)
		rep.AgentRate = float64(rep.Agent) / max(agentAt.Sub(first).Seconds(), 0.01)
	}
	return rep
}

// measureRate fills the queue with agent events through one edge, then
// starts n delivery nodes sharing `rate perSecond/1s` and measures the
// deliveries per second at the sink once the first second's burst is
// past, over rateWindow.
func (s *scaleRun) measureRate(n, perSecond int) *scaleRate {
	const rateWindow = 6 * time.Second
	rep := &scaleRate{Nodes: n, Rate: fmt.Sprintf("%d/1s", perSecond), Want: float64(perSecond)}
	ns := "scalerate"
	edge, err := s.startRole(ns, ns+"-edge", 1, roleEdge, "")
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	defer stopScaleNodes(edge)
	want := int(rateWindow.Seconds()+3) * perSecond
	accepted := 0
	for accepted < want && s.ctx.Err() == nil {
		accepted += int(s.fill(edge[0], "agent", time.Second))
	}
	base, err := s.sink.counts()
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	nodes, err := s.startRole(ns, ns, n, roleDeliver, rep.Rate)
	if err != nil {
		rep.Error = "refused: " + lastLine(err.Error())
		return rep
	}
	defer stopScaleNodes(nodes)
	var t0 time.Time
	var c0 int
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		c, err := s.sink.counts()
		if err != nil {
			rep.Error = err.Error()
			return rep
		}
		got, now := c.Agent-base.Agent, time.Now()
		switch {
		case t0.IsZero() && got >= perSecond+perSecond/2:
			t0, c0 = now, got
		case !t0.IsZero() && now.Sub(t0) >= rateWindow:
			rep.Window = now.Sub(t0).Seconds()
			rep.Measured = float64(got-c0) / rep.Window
			return rep
		}
		time.Sleep(5 * time.Millisecond)
	}
	rep.Error = "too few deliveries within a minute"
	return rep
}

// lastLine is the reason a Caddy that failed to start logged last: the
// handler's own error when there is one.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	s = s[strings.LastIndexByte(s, '\n')+1:]
	if _, reason, ok := strings.Cut(s, "http.handlers.hooks: "); ok {
		s, _, _ = strings.Cut(reason, `"`)
	}
	return s
}

// loadAverage reads the 1-minute load average ("" when unknown).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
