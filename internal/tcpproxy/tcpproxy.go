// Package tcpproxy forwards TCP connections from a loopback listener its
// owner holds to a target address the owner can change or clear: clients
// keep one address while the server behind it stops and starts again (on
// a new port), and a seed route of a NATS cluster can be configured before
// the server it leads to has picked its port.
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target.
const dialTimeout = 2 * time.Second

// Proxy forwards connections from its listener to the current target.
type Proxy struct {
	l      net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// New listens on 127.0.0.1:0 and forwards to target ("" = refuse).
func New(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{l: l, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetTarget forwards new connections to target ("" = refuse them) and
// cuts the ones open now.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	conns := p.conns
	p.conns = make(map[net.Conn]struct{})
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	_ = p.l.Close()
	p.SetTarget("")
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		if target == "" {
			_ = c.Close()
			continue
		}
		go p.pipe(c, target)
	}
}

func (p *Proxy) pipe(c net.Conn, target string) {
	d, err := net.DialTimeout("tcp", target, dialTimeout)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.target != target {
		p.mu.Unlock()
		_ = c.Close()
		_ = d.Close()
		return
	}
	p.conns[c], p.conns[d] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
	_, _ = io.Copy(c, d)
	_ = c.Close()
}
