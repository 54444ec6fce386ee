package main

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// countingServer is a loopback server that records who asked what.
type countingServer struct {
	*httptest.Server
	mu        sync.Mutex
	requests  int
	conns     int
	remotes   map[string]int  // client IP → requests
	peers     map[string]bool // client ip:port seen
	forwarded map[string]int  // X-Forwarded-For → requests
}

// startCountingServer answers every request with status; closeEvery > 0
// asks the client to close after that many answers on a connection.
func startCountingServer(t *testing.T, status int, closeAll bool) *countingServer {
	t.Helper()
	s := &countingServer{remotes: map[string]int{}, peers: map[string]bool{}, forwarded: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		s.requests++
		s.remotes[host]++
		s.peers[r.RemoteAddr] = true
		if f := r.Header.Get("X-Forwarded-For"); f != "" {
			s.forwarded[f]++
		}
		s.mu.Unlock()
		if closeAll {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// spec returns a load spec for the server with the wake row's request.
func (s *countingServer) spec(src sourceKind) *loadSpec {
	addr := strings.TrimPrefix(s.URL, "http://")
	r, _ := findRow(rowCatalogue(), "c")
	sp := &loadSpec{addr: addr, expect: http.StatusOK, source: src, perAddr: 3, spread: new(spreadAddrs), fwd: new(atomic.Uint64)}
	sp.request, sp.xffAt = buildRequest(r, addr, "tok", src == srcForwarded)
	if src == srcSpread {
		sp.lastRequest = closingRequest(r, addr, "tok")
	}
	return sp
}

// loadAtLeast runs spec in 200ms slices until at least n requests were
// answered (at most a minute) and returns the merged result, so a test
// gets the traffic it needs however slow the machine is.
func loadAtLeast(t *testing.T, spec *loadSpec, conns int, n uint64) *result {
	t.Helper()
	total := new(result)
	for deadline := time.Now().Add(time.Minute); total.requests < n; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests answered in a minute", total.requests, n)
		}
		total.merge(runLoad(context.Background(), spec, conns, 200*time.Millisecond))
	}
	return total
}

func TestRunLoadKeepAlive(t *testing.T) {
	s := startCountingServer(t, http.StatusOK, false)
	res := runLoad(context.Background(), s.spec(srcLoopback), 4, 300*time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res.requests == 0 || res.requests != uint64(s.requests) || res.statuses[200] != res.requests || res.hist.count() != res.requests {
		t.Fatalf("client counted %d (200s: %d, latencies: %d), server %d", res.requests, res.statuses[200], res.hist.count(), s.requests)
	}
	if res.errors(http.StatusOK) != 0 || res.errors(http.StatusUnauthorized) != res.requests {
		t.Fatalf("errors: %d against 200, %d against 401", res.errors(http.StatusOK), res.errors(http.StatusUnauthorized))
	}
	if s.conns != 4 || res.dials != 0 {
		t.Fatalf("server saw %d connections, client re-dialled %d times; want 4 and 0", s.conns, res.dials)
	}
	// at least the run's length; the upper bound only says it stopped
	if res.elapsed < 300*time.Millisecond || res.elapsed > 30*time.Second {
		t.Fatalf("elapsed %v for a 300ms run", res.elapsed)
	}
}

func TestRunLoadSpreadsSourceAddresses(t *testing.T) {
	s := startCountingServer(t, http.StatusOK, false)
	res := loadAtLeast(t, s.spec(srcSpread), 2, 30)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.remotes) < 10 {
		t.Fatalf("only %d source addresses for %d requests", len(s.remotes), res.requests)
	}
	for ip, n := range s.remotes {
		if n > 3 || !strings.HasPrefix(ip, "127.") || ip == "127.0.0.1" {
			t.Fatalf("%s sent %d requests (want ≤ 3 from a spread address)", ip, n)
		}
	}
	if s.conns*3 < s.requests {
		t.Fatalf("%d connections for %d requests at 3 per address", s.conns, s.requests)
	}
}

func TestRunLoadForwardedAddresses(t *testing.T) {
	s := startCountingServer(t, http.StatusOK, false)
	res := runLoad(context.Background(), s.spec(srcForwarded), 2, 200*time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(len(s.forwarded)) != res.requests || len(s.remotes) != 1 {
		t.Fatalf("%d requests carried %d distinct X-Forwarded-For values from %d peers", res.requests, len(s.forwarded), len(s.remotes))
	}
}

func TestRunLoadReconnectsWhenServerCloses(t *testing.T) {
	s := startCountingServer(t, http.StatusUnauthorized, true)
	sp := s.spec(srcLoopback)
	sp.expect = http.StatusUnauthorized
	res := loadAtLeast(t, sp, 2, 10)
	if res.netErrs != 0 || res.errors(http.StatusUnauthorized) != 0 {
		t.Fatalf("%d requests, %d connection errors, %d errors", res.requests, res.netErrs, res.errors(http.StatusUnauthorized))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns < s.requests {
		t.Fatalf("%d connections for %d requests that each closed theirs", s.conns, s.requests)
	}
}

// boundNotListening returns a loopback address whose port this test holds
// (bound, so no other program can take it) without listening on it:
// connections to it are refused.
func boundNotListening(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*syscall.SockaddrInet4).Port)).String()
}

func TestRunLoadCountsDeadServer(t *testing.T) {
	addr := boundNotListening(t) // nothing listens there
	r, _ := findRow(rowCatalogue(), "a")
	sp := &loadSpec{addr: addr, expect: 200}
	sp.request, _ = buildRequest(r, addr, "tok", false)
	res := runLoad(context.Background(), sp, 2, 100*time.Millisecond)
	if res.requests != 0 || res.netErrs == 0 || res.errors(200) != res.netErrs {
		t.Fatalf("dead server: %d answers, %d connection errors", res.requests, res.netErrs)
	}
}

func TestRunLoadStopsOnCancel(t *testing.T) {
	s := startCountingServer(t, http.StatusOK, false)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	runLoad(ctx, s.spec(srcLoopback), 2, time.Minute)
	if d := time.Since(start); d > 30*time.Second { // the run is a minute: the cancel stopped it
		t.Fatalf("cancelled run took %v", d)
	}
}

// TestRunLoadLeavesNoClientTimeWait checks that the generator's
// connections do not end in TIME_WAIT on the client side: that would hold
// ephemeral ports for a minute, which other programs on the machine
// then cannot listen on.
func TestRunLoadLeavesNoClientTimeWait(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp")
	}
	for _, src := range []sourceKind{srcLoopback, srcSpread} {
		s := startCountingServer(t, http.StatusOK, false)
		res := loadAtLeast(t, s.spec(src), 4, 10)
		s.mu.Lock()
		n := timeWaits(t, s.peers, strings.TrimPrefix(s.URL, "http://"))
		s.mu.Unlock()
		// a rare one may still race the server's FIN; without the
		// precautions every connection ends in TIME_WAIT
		if uint64(n) > max(1, res.dials/100) {
			t.Errorf("source %d: %d of %d client sockets in TIME_WAIT", src, n, len(s.peers))
		}
	}
}

// timeWaits counts the TIME_WAIT sockets from an address in addrs to
// server: the client sockets of the server's connections. (A local
// address alone is not theirs: once a connection is reset, its ephemeral
// port is free, and a socket of any other program, or a server another
// test bound to port 0, may end in TIME_WAIT on it; with the thousands
// of TIME_WAIT sockets the test suites leave on the machine, 4 of 60 runs
// counted two.)
func timeWaits(t *testing.T, addrs map[string]bool, server string) int {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "06" && addrs[procAddr(f[1])] && procAddr(f[2]) == server {
			n++
		}
	}
	return n
}

// procAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func procAddr(s string) string {
	ipHex, portHex, ok := strings.Cut(s, ":")
	ip, err1 := strconv.ParseUint(ipHex, 16, 32)
	port, err2 := strconv.ParseUint(portHex, 16, 16)
	if !ok || err1 != nil || err2 != nil {
		return ""
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(ip)) // the kernel prints the address in host order
	return netip.AddrPortFrom(netip.AddrFrom4(b), uint16(port)).String()
}
