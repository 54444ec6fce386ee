// Package tcpproxy forwards TCP connections from a loopback listener its
// owner holds to a target address the owner can change or clear: clients
// keep one address while the server behind it stops and starts again (on
// a new port), and a seed route of a NATS cluster can be configured before
// the server it leads to has picked its port.
//
// A proxy can also be blackholed: it stops forwarding in both directions
// but keeps every socket open, as a network partition does (no reset, no
// close: a writer's buffers fill and then it blocks). New connections are
// accepted and held silent. When the blackhole ends, what was held is
// forwarded, as TCP retransmits after a partition heals.
package tcpproxy

import (
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target.
const dialTimeout = 2 * time.Second

// sockBuffer is the receive buffer of the proxy's sockets. Fixed and
// small, so that a blackholed proxy takes in about what a partitioned
// network would (the sender's own buffer, then nothing) instead of the
// tens of megabytes an auto-tuned loopback socket accepts.
const sockBuffer = 64 << 10

// Proxy forwards connections from its listener to the current target.
type Proxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	pairs  map[*pair]struct{}
	// resume is open (not closed) while the proxy is blackholed and is
	// closed when forwarding resumes; nil while forwarding.
	resume chan struct{}
	wg     sync.WaitGroup
}

// pair is one client connection and its connection to the target.
type pair struct {
	client, server net.Conn
	cut            chan struct{} // closed when the pair is cut
	once           sync.Once
}

func (c *pair) close() {
	c.once.Do(func() {
		close(c.cut)
		_ = c.client.Close()
		if c.server != nil {
			_ = c.server.Close()
		}
	})
}

// New listens on 127.0.0.1:0 and forwards to target ("" = refuse).
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, pairs: make(map[*pair]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Conns is the number of client connections forwarded now (a NATS
// client's proxy to a server holds one while it is connected there).
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// SetTarget forwards new connections to target ("" = refuse them) and
// cuts the ones open now.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	pairs := p.pairs
	p.pairs = make(map[*pair]struct{})
	p.mu.Unlock()
	for c := range pairs {
		c.close()
	}
}

// Blackhole stops (on) or resumes (off) forwarding without closing
// anything: the connections open now stay open and silent, new ones are
// accepted and held. Resuming forwards what was held, in order.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.resume == nil:
		p.resume = make(chan struct{})
	case !on && p.resume != nil:
		close(p.resume)
		p.resume = nil
	}
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	_ = p.l.Close()
	p.SetTarget("")
	p.Blackhole(false)
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(sockBuffer)
		}
		p.mu.Lock()
		target := p.target
		pr := &pair{client: c, cut: make(chan struct{})}
		if target != "" {
			p.pairs[pr] = struct{}{}
		}
		p.mu.Unlock()
		if target == "" {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.pipe(pr, target)
	}
}

// pass waits while the proxy is blackholed; it reports false once the
// pair is cut.
func (p *Proxy) pass(c *pair) bool {
	for {
		p.mu.Lock()
		resume := p.resume
		p.mu.Unlock()
		if resume == nil {
			select {
			case <-c.cut:
				return false
			default:
				return true
			}
		}
		select {
		case <-resume:
		case <-c.cut:
			return false
		}
	}
}

func (p *Proxy) pipe(c *pair, target string) {
	defer p.wg.Done()
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.pairs, c)
		p.mu.Unlock()
	}()
	if !p.pass(c) {
		return
	}
	d, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		return
	}
	if tc, ok := d.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(sockBuffer)
	}
	p.mu.Lock()
	_, live := p.pairs[c]
	if live {
		c.server = d
	}
	p.mu.Unlock()
	if !live {
		_ = d.Close()
		return
	}
	done := make(chan struct{})
	go func() { defer close(done); p.copy(c, d, c.client); c.close() }()
	p.copy(c, c.client, d)
	c.close()
	<-done
}

// copy forwards src to dst until either fails or the pair is cut,
// holding (neither reading nor writing) while the proxy is blackholed.
func (p *Proxy) copy(c *pair, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for p.pass(c) {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(c) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
