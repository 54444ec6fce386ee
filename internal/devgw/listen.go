package devgw

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Listen opens addr: unix//path (a stale socket file is replaced) or a
// loopback host:port.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix/"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		return net.Listen("unix", path)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("devgateway listens on loopback or a Unix socket only, not %q", addr)
	}
	return net.Listen("tcp", addr)
}

// Server wraps g in an http.Server with sane timeouts.
func Server(g *Gateway) *http.Server {
	return &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
}
