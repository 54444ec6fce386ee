// Package listenguard is the `hooks` app, which every hooks handler loads
// into its config: when the config starts, it refuses to run if another
// process already listens on an address this one serves (Caddy binds with
// SO_REUSEPORT, so a second Caddy would silently share the connections).
// It reads the sockets from /proc (Linux; elsewhere it checks nothing)
// and needs nothing of the handler.
package listenguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(new(App))
}

// App is the `hooks` app, which a hooks handler loads into its
// config (nobody configures it): when the config starts, and only then
// (`caddy validate` provisions a config without starting it, while the
// running instance holds the same addresses), it refuses to run when
// another process already listens on an address this one serves.
//
// Caddy binds its listeners with SO_REUSEPORT, so on Linux a second
// Caddy of the same user binds the same address without an error and the
// kernel splits the connections between the two: hooks answered by
// either config (200s and 404s), admin calls (a reload!) reaching either
// process. The guard checks the fixed-port TCP addresses of every server
// with a hooks handler, and every TCP listener this process holds (which
// includes the admin endpoint). A socket this process holds is never a
// conflict, so a `caddy reload` (the old config still listening) and many
// in-process instances (tests) are fine. Linux only (it reads /proc);
// elsewhere it checks nothing.
type App struct {
	mu    sync.Mutex
	sites []guardedSite
}

// guardedSite is one listen address of a server with a hooks handler.
type guardedSite struct {
	server, addr string
}

// CaddyModule returns the Caddy module information.
func (*App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "hooks",
		New: func() caddy.Module { return new(App) },
	}
}

// Guard registers the listen addresses of the server of ctx (a hooks
// handler's) with its config's guard. A handler outside an HTTP server (a
// dry run, unit tests) has no config to guard.
func Guard(ctx caddy.Context) error {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return nil
	}
	app, err := ctx.App("hooks")
	if err != nil {
		return err
	}
	g := app.(*App)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, a := range srv.Listen {
		s := guardedSite{server: srv.Name(), addr: a}
		if !slices.Contains(g.sites, s) {
			g.sites = append(g.sites, s)
		}
	}
	return nil
}

// Start implements caddy.App: it fails the config when another process
// listens where this one does (see App).
func (g *App) Start() error {
	g.mu.Lock()
	sites := slices.Clone(g.sites)
	g.mu.Unlock()
	return checkSharedListeners(procRoot, sites)
}

// Stop implements caddy.App.
func (*App) Stop() error { return nil }

// procListener is a listening TCP socket read from /proc: its local
// address and its inode (which tells sockets apart, also when a process
// inherited another's socket).
type procListener struct {
	addr  netip.AddrPort
	inode uint64
}

// guardTarget is an address to check, and how to name it.
type guardTarget struct {
	addr  netip.AddrPort // an unspecified IP: every interface
	label string
}

// sharedConflict is a foreign socket found on a target.
type sharedConflict struct {
	target guardTarget
	owner  string // "pid N (command line)", or why it cannot be told
}

// checkSharedListeners returns an error naming every address of sites,
// or listener of this process, that another process listens on too, and
// that process. Without the /proc files (another OS) it checks nothing.
func checkSharedListeners(root string, sites []guardedSite) error {
	own, listeners, ok := readListeners(root)
	if !ok {
		return nil
	}
	var targets []guardTarget
	for _, s := range sites {
		targets = append(targets, siteTargets(s)...)
	}
	for _, l := range listeners {
		if own[l.inode] {
			targets = append(targets, guardTarget{addr: l.addr, label: "the admin endpoint, or another listener of this Caddy"})
		}
	}
	var found []sharedConflict
	seen := map[netip.AddrPort]bool{}
	for _, t := range targets {
		if seen[t.addr] {
			continue
		}
		for _, l := range listeners {
			if own[l.inode] || !overlaps(l.addr, t.addr) || !stillListening(root, l.inode) {
				continue
			}
			seen[t.addr] = true
			found = append(found, sharedConflict{target: t, owner: socketOwner(root, l.inode)})
			break
		}
	}
	if len(found) == 0 {
		return nil
	}
	parts := make([]string, len(found))
	for i, c := range found {
		parts[i] = fmt.Sprintf("%s (%s) by %s", c.target.addr, c.target.label, c.owner)
	}
	return fmt.Errorf("hooks: another process already listens on %s. Two servers on one address would each take part of its connections "+
		"(Caddy binds with SO_REUSEPORT): stop the other instance, or give this config other addresses (site address, bind, admin)",
		strings.Join(parts, ", and on "))
}

// siteTargets expands one listen address (host, port range) into the
// addresses to check: fixed TCP ports only (port 0 is the kernel's
// choice, which no other socket holds; Unix sockets and file descriptors
// are left out).
func siteTargets(s guardedSite) []guardTarget {
	na, err := caddy.ParseNetworkAddress(s.addr)
	if err != nil || !strings.HasPrefix(na.Network, "tcp") || na.StartPort == 0 {
		return nil
	}
	label := fmt.Sprintf("listen address %s of server %s", s.addr, s.server)
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(strings.Trim(na.Host, "[]")); err == nil {
		ips = []netip.Addr{ip}
	} else if na.Host == "" {
		ips = []netip.Addr{netip.IPv6Unspecified()}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ips, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", na.Host)
		cancel()
	}
	var out []guardTarget
	for port := na.StartPort; port <= na.EndPort && port-na.StartPort < 1024; port++ {
		for _, ip := range ips {
			out = append(out, guardTarget{addr: netip.AddrPortFrom(ip.Unmap(), uint16(port)), label: label})
		}
	}
	return out
}

// overlaps reports whether two listening addresses take the same
// connections: the same port and the same IP, or either on every
// interface.
func overlaps(a, b netip.AddrPort) bool {
	if a.Port() != b.Port() {
		return false
	}
	ia, ib := a.Addr().Unmap(), b.Addr().Unmap()
	return ia.IsUnspecified() || ib.IsUnspecified() || ia == ib
}

// Interface guards
var (
	_ caddy.App = (*App)(nil)
)
