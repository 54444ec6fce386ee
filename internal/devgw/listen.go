package devgw

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Listen opens addr: unix//path or a loopback host:port. A socket file
// nothing listens on any more is replaced; one a running gateway serves is
// left alone (an error), so a second instance cannot cut the first off.
func Listen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix/"); ok {
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
				_ = conn.Close()
				return nil, fmt.Errorf("%s is in use by a running gateway; stop it first or choose another socket", path)
			}
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
