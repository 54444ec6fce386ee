// Package natstest runs real NATS JetStream servers in-process for tests:
// one node, or a cluster on loopback, every listener on a port the server
// itself picked (port -1, read back) and every store in a test directory.
//
// A Proxy is a listener the test owns that forwards to a server; clients
// that dial the proxy keep one address while the server behind it stops
// and starts again (on a new port).
package natstest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natsrun"
	"github.com/caddyhook/caddyhook/internal/tcpproxy"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// readyTimeout bounds a server's start and a cluster's leader election.
const readyTimeout = 30 * time.Second

// Server is one in-process nats-server with JetStream.
type Server struct {
	*server.Server
	opts *server.Options
}

// Options shape a test server.
type Options struct {
	// NoJetStream starts a server without JetStream.
	NoJetStream bool
	// Name is the server's name (default generated).
	Name string
	// StoreDir holds JetStream's files (default a new t.TempDir()).
	StoreDir string
	// Cluster, when set, joins a cluster of that name through Routes.
	Cluster string
	Routes  []*url.URL
	// Token requires clients to present it.
	Token string
	// SyncAlways makes JetStream fsync every write before acknowledging
	// it (sync_interval: always), for tests of what survives.
	SyncAlways bool
}

// Run starts one server for t and stops it when t ends.
func Run(t testing.TB, o Options) *Server {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	opts := &server.Options{
		ServerName: o.Name, Host: "127.0.0.1", Port: -1, JetStream: !o.NoJetStream, StoreDir: o.StoreDir,
		NoLog: true, NoSigs: true, Authorization: o.Token, SyncAlways: o.SyncAlways,
	}
	if o.Cluster != "" {
		opts.Cluster = server.ClusterOpts{Name: o.Cluster, Host: "127.0.0.1", Port: -1}
		opts.Routes = o.Routes
	}
	s := &Server{opts: opts}
	s.start(t)
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	ns, err := server.NewServer(s.opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(readyTimeout) {
		ns.Shutdown()
		t.Fatalf("nats-server %s not ready within %s", s.opts.ServerName, readyTimeout)
	}
	s.Server = ns
	t.Cleanup(ns.Shutdown)
}

// URL is the server's client URL.
func (s *Server) URL() string { return s.ClientURL() }

// Addr is the server's client address (host:port).
func (s *Server) Addr() string { return strings.TrimPrefix(s.ClientURL(), "nats://") }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Restart starts the server again on the same store (on a new port).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// Cluster is a JetStream cluster of in-process servers on loopback.
type Cluster struct {
	Servers []*Server
	seed    *Proxy
}

// RunCluster starts n servers that find each other through a seed route:
// a proxy the test owns, forwarding to the first server's cluster port,
// which every server has as its configured route (JetStream needs one).
// The servers sync every write (these tests are about what survives the
// loss of a server). It returns once the cluster has elected its
// metadata leader.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return RunClusterStores(t, make([]string, n))
}

// RunClusterStores is RunCluster with server i's store in stores[i] (""
// for a new t.TempDir()), e.g. a filesystem the test freezes.
func RunClusterStores(t testing.TB, stores []string) *Cluster {
	t.Helper()
	c := &Cluster{seed: NewProxy(t, "")}
	seed, _ := url.Parse("nats-route://" + c.seed.Addr())
	for i, dir := range stores {
		s := Run(t, Options{Name: fmt.Sprintf("n%d", i+1), Cluster: "hooks-test", Routes: []*url.URL{seed}, SyncAlways: true,
			StoreDir: dir})
		if i == 0 {
			c.seed.SetTarget(s.ClusterAddr().String())
		}
		c.Servers = append(c.Servers, s)
	}
	WaitJetStream(t, c.URLs())
	c.waitMetaPeers(t)
	return c
}

// waitMetaPeers polls until the JetStream meta leader sees every other
// server as a current peer: before that, placing a replicated stream or
// bucket can fail with "no suitable peers for placement" although the
// JetStream API already answers.
func (c *Cluster) waitMetaPeers(t testing.TB) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("the JetStream meta leader to see %d current peers", len(c.Servers)-1), func() bool {
		for _, s := range c.Servers {
			if !s.JetStreamIsLeader() {
				continue
			}
			jsz, err := s.Jsz(nil)
			if err != nil || jsz.Meta == nil || len(jsz.Meta.Replicas) != len(c.Servers)-1 {
				return false
			}
			for _, r := range jsz.Meta.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
			return true
		}
		return false
	})
}

// URLs are the client URLs of the servers still running.
func (c *Cluster) URLs() []string {
	var out []string
	for _, s := range c.Servers {
		if s.Running() {
			out = append(out, s.URL())
		}
	}
	return out
}

// WaitJetStream polls until the JetStream API answers through urls.
func WaitJetStream(t testing.TB, urls []string) {
	t.Helper()
	if err := natsrun.WaitJetStream(strings.Join(urls, ","), readyTimeout); err != nil {
		t.Fatal(err)
	}
}

// Proxy forwards TCP connections from a listener the test owns to a target
// address that the test can change or clear.
type Proxy struct{ *tcpproxy.Proxy }

// NewProxy listens on 127.0.0.1:0 and forwards to target ("" = refuse).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := tcpproxy.New(target)
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p}
}

// URL is the proxy's address as a NATS client URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// WaitTimeout bounds WaitFor.
const WaitTimeout = testkit.PollTimeout

// WaitFor polls cond until it holds, failing t after WaitTimeout
// (testkit.WaitFor).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, what, cond)
}

// PlainClient is a NATS client (and its JetStream API) on url that is no
// node of a caddyhook cluster: what anyone who reaches the servers can
// do. It closes when t ends.
func PlainClient(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Rotate returns urls starting at i: each node of a test gets its own
// order, hence its own connection.
func Rotate(urls []string, i int) []string {
	i %= len(urls)
	return append(slices.Clone(urls[i:]), urls[:i]...)
}

// Gateway is a spool.Sender that records deliveries by event id. Respond,
// when set, decides each answer (attempt counts the earlier sends of the
// id); the default is 200.
type Gateway struct {
	Respond func(ev *spool.Event, attempt int) (int, string, error)

	mu    sync.Mutex
	sends map[string]int
	order []string // ids answered 2xx, in order
}

// Send implements spool.Sender.
func (g *Gateway) Send(_ context.Context, ev *spool.Event) (int, string, error) {
	g.mu.Lock()
	if g.sends == nil {
		g.sends = make(map[string]int)
	}
	attempt := g.sends[ev.ID]
	g.sends[ev.ID]++
	g.mu.Unlock()
	status, reason, err := http.StatusOK, "", error(nil)
	if g.Respond != nil {
		status, reason, err = g.Respond(ev, attempt)
	}
	if err == nil && status >= 200 && status < 300 {
		g.mu.Lock()
		g.order = append(g.order, ev.ID)
		g.mu.Unlock()
	}
	return status, reason, err
}

// Counts returns the distinct ids delivered and how many of them were
// delivered more than once.
func (g *Gateway) Counts() (distinct, doubled int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := map[string]int{}
	for _, id := range g.order {
		n[id]++
		if n[id] == 2 {
			doubled++
		}
	}
	return len(n), doubled
}

// Delivered is the number of distinct ids delivered.
func (g *Gateway) Delivered() int { n, _ := g.Counts(); return n }

// Order is the ids delivered, in order.
func (g *Gateway) Order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// Attempts is how often id was sent.
func (g *Gateway) Attempts(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sends[id]
}

// Events builds n events of kind with ids <prefix>-000 ….
func Events(prefix, kind string, n int) []*spool.Event {
	out := make([]*spool.Event, n)
	for i := range out {
		out[i] = &spool.Event{ID: fmt.Sprintf("%s-%03d", prefix, i), Kind: kind, Path: "/hooks/" + kind,
			Body: fmt.Appendf(nil, `{"n":%d}`, i), FirstSeen: time.Now()}
	}
	return out
}

// GrayProxy forwards NATS client connections to a server and can turn the
// server gray: it goes on forwarding everything the client sends and
// every PING, PONG, INFO and error the server sends, so the connection
// stays up, but drops the server's replies (messages to _INBOX
// subjects), so every JetStream request through it times out, as through
// a server whose store stalled.
type GrayProxy struct {
	l      net.Listener
	target string
	gray   atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewGrayProxy listens on 127.0.0.1:0 and forwards to target; it closes
// when t ends.
func NewGrayProxy(t testing.TB, target string) *GrayProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("gray proxy listen: %v", err)
	}
	p := &GrayProxy{l: l, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's address as a NATS client URL.
func (p *GrayProxy) URL() string { return "nats://" + p.l.Addr().String() }

// Gray turns the dropping of replies on or off.
func (p *GrayProxy) Gray(on bool) { p.gray.Store(on) }

// Conns is the number of client connections forwarded now.
func (p *GrayProxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) / 2
}

// Close stops the proxy and cuts its connections.
func (p *GrayProxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *GrayProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *GrayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *GrayProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			_, _ = c.Close(), s.Close()
			return
		}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(s, c); p.untrack(c, s) }()
		go func() { defer p.wg.Done(); p.down(c, s); p.untrack(c, s) }()
	}
}

// down forwards the server's protocol to the client frame by frame,
// dropping the replies while gray.
func (p *GrayProxy) down(client, server net.Conn) {
	r := bufio.NewReaderSize(server, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		line = slices.Clone(line)
		var payload []byte
		if f := strings.Fields(string(line)); len(f) >= 4 && (f[0] == "MSG" || f[0] == "HMSG") {
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			payload = make([]byte, n+2)
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
			if p.gray.Load() && strings.HasPrefix(f[1], "_INBOX.") {
				continue
			}
		}
		if _, err := client.Write(append(line, payload...)); err != nil {
			return
		}
	}
}
