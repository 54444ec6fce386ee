package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec is one row's load: where to send, what, from where, and which
// status counts as success.
type loadSpec struct {
	addr    string // 127.0.0.1:port
	request []byte // the serialised request, sent as is
	// lastRequest is request with "Connection: close", sent as a spread
	// connection's last request so the server closes first: the TIME_WAIT
	// then sits on the server's fixed port, not on an ephemeral port
	// other programs on the machine may want to listen on.
	lastRequest []byte
	expect      int
	source      sourceKind
	perAddr     int            // srcSpread: requests per source address
	xffAt       int            // srcForwarded: offset of the address in request
	spread      *spreadAddrs   // srcSpread: the run's address allocator
	fwd         *atomic.Uint64 // srcForwarded: the run's address counter
	// keyAt, when set, is the offset of a keyWidth-digit Idempotency-Key
	// value in request, rewritten from keys on every request.
	keyAt int
	keys  *atomic.Uint64
	// every, when set, paces each connection: one request starts at most
	// every this long (an offered load that does not follow the server's
	// speed).
	every time.Duration
}

// result is what load runs measured; results of several runs (rounds)
// merge into one.
type result struct {
	requests uint64 // answered requests
	elapsed  time.Duration
	hist     histogram
	statuses [600]uint64
	netErrs  uint64 // failed writes, reads, dials and malformed answers
	dials    uint64 // connections opened while the clock ran
	cpu      cpuTimes
}

// errors counts answers with another status than expect, plus netErrs.
func (r *result) errors(expect int) uint64 {
	n := r.netErrs
	for st, c := range r.statuses {
		if st != expect {
			n += c
		}
	}
	return n
}

// rps is the throughput over the measured time.
func (r *result) rps() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.requests) / r.elapsed.Seconds()
}

// merge adds o to r.
func (r *result) merge(o *result) {
	r.requests += o.requests
	r.elapsed += o.elapsed
	r.hist.merge(&o.hist)
	for i, c := range o.statuses {
		r.statuses[i] += c
	}
	r.netErrs += o.netErrs
	r.dials += o.dials
	r.cpu = r.cpu.add(o.cpu)
}

// runLoad drives spec with conns keep-alive connections for dur and
// returns what it measured. Connections are opened before the clock
// starts; the clock stops when the last in-flight answer is in. ctx
// cancels early.
func runLoad(ctx context.Context, spec *loadSpec, conns int, dur time.Duration) *result {
	workers := make([]*worker, conns)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var deadline time.Time
	var stop atomic.Bool
	for i := range workers {
		w := &worker{spec: spec, stop: &stop, req: append([]byte(nil), spec.request...), last: spec.lastRequest}
		workers[i] = w
		ready.Add(1)
		done.Go(func() {
			w.connect(time.Now().Add(dur + time.Minute))
			ready.Done()
			<-start
			w.run(deadline)
		})
	}
	ready.Wait()
	t0 := time.Now()
	deadline = t0.Add(dur)
	close(start)
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-finished:
		}
	}()
	done.Wait()
	elapsed := time.Since(t0)
	close(finished)
	total := new(result)
	for _, w := range workers {
		w.abort()
		w.res.dials-- // the connection opened before the clock
		total.merge(&w.res)
	}
	total.elapsed = elapsed
	return total
}

// worker is one connection's request loop.
type worker struct {
	spec     *loadSpec
	stop     *atomic.Bool
	req      []byte // own copy: srcForwarded rewrites it
	last     []byte // spec.lastRequest
	conn     net.Conn
	br       *bufio.Reader
	used     int // requests on conn
	hardStop time.Time
	res      result
}

// connect (re)opens the connection from the row's source address. On
// failure conn stays nil and the next iteration retries.
func (w *worker) connect(hardStop time.Time) {
	w.abort()
	w.hardStop = hardStop
	d := net.Dialer{Timeout: 5 * time.Second}
	switch w.spec.source {
	case srcLocked:
		d.LocalAddr = &net.TCPAddr{IP: lockedAddr.AsSlice()}
	case srcSpread:
		d.LocalAddr = &net.TCPAddr{IP: w.spec.spread.take().AsSlice()}
	case srcLoopback, srcForwarded: // the dialer's own address
	}
	w.res.dials++
	conn, err := d.Dial("tcp", w.spec.addr)
	if err != nil {
		w.res.netErrs++
		time.Sleep(10 * time.Millisecond) // no busy loop while the server is gone
		return
	}
	_ = conn.SetDeadline(hardStop) // one deadline for the whole run: a hang fails, never blocks
	w.conn, w.used = conn, 0
	if w.br == nil {
		w.br = bufio.NewReaderSize(conn, 16<<10)
	} else {
		w.br.Reset(conn)
	}
}

// abort drops the connection with a reset, so that no TIME_WAIT is left
// on the client's ephemeral port (hookbench opens and drops connections
// all run long; other programs on the machine need those ports).
func (w *worker) abort() {
	if w.conn == nil {
		return
	}
	if tc, ok := w.conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = w.conn.Close()
	w.conn = nil
}

// closeAfterServer closes the connection once the server has closed its
// side (read until EOF), so that the server keeps the TIME_WAIT.
func (w *worker) closeAfterServer() {
	_ = w.conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err := w.br.Discard(1 << 20)
	if err != io.EOF {
		w.abort() // the server did not close after all
		return
	}
	_ = w.conn.Close()
	w.conn = nil
}

// run sends requests one at a time until deadline.
func (w *worker) run(deadline time.Time) {
	spec := w.spec
	var next time.Time
	for !w.stop.Load() {
		if spec.every > 0 {
			if wait := time.Until(next); wait > 0 {
				time.Sleep(wait)
			}
			next = time.Now().Add(spec.every)
		}
		t := time.Now()
		if t.After(deadline) {
			return
		}
		if w.conn == nil || spec.source == srcSpread && w.used >= spec.perAddr {
			w.connect(w.hardStop)
			continue
		}
		if spec.source == srcForwarded {
			putForwarded(w.req[spec.xffAt:spec.xffAt+forwardedWidth], spec.fwd.Add(1))
		}
		if spec.keyAt > 0 {
			putDigits(w.req[spec.keyAt:spec.keyAt+keyWidth], spec.keys.Add(1))
		}
		req := w.req
		if w.last != nil && w.used == spec.perAddr-1 {
			req = w.last
		}
		_, err := w.conn.Write(req)
		var resp response
		if err == nil {
			resp, err = readResponse(w.br)
		}
		if err != nil {
			w.res.netErrs++
			w.abort()
			continue
		}
		w.res.hist.record(time.Since(t))
		w.res.requests++
		w.res.statuses[min(resp.status, len(w.res.statuses)-1)]++
		w.used++
		if resp.close {
			w.closeAfterServer()
		}
	}
}
