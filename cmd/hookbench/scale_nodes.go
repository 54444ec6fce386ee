package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The cluster-scale harness runs every node as a Caddy process of its own
// (so that each node's CPU is read from /proc, as an edge's would be on
// its host) and NATS as a cmd/natsdev process (so that what NATS itself
// costs is read apart from the nodes and the load generator).

// scaleNodeRole is what a node of the harness does.
type scaleNodeRole int

const (
	// roleEdge accepts into the cluster queue and never delivers.
	roleEdge scaleNodeRole = iota
	// roleDeliver delivers from the cluster queue to the sink.
	roleDeliver
	// roleAlone has no cluster at all (the baseline of the flood).
	roleAlone
)

// scaleNodeConfig is one node's Caddyfile settings.
type scaleNodeConfig struct {
	admin     string // admin Unix socket
	port      int    // the site's port (a socket hookbench holds, handed over as fd/3)
	token     string
	gwToken   string
	sink      string // the gateway sink's Unix socket (roleDeliver)
	natsURL   string
	namespace string
	key       string // the cluster's signing key
	role      scaleNodeRole
	rate      string // roleDeliver: the spool's rate ("" = none)
}

// scaleLimit and scaleWindow are the nodes' lockout threshold and window.
const (
	scaleLimit  = 20
	scaleWindow = time.Minute
)

// caddyfile is the node's Caddyfile: one site on fd/3 whose client
// addresses come from X-Forwarded-For (the load generator is a trusted
// proxy on loopback), a hooks handler in cluster mode.
func (c scaleNodeConfig) caddyfile() string {
	var spool string
	cluster := fmt.Sprintf("cluster nats %s {\n\t\t\tname %s\n\t\t\tsigning_key %s\n\t\t\ttimeout 2s\n\t\t}", c.natsURL, c.namespace, c.key)
	switch c.role {
	case roleAlone:
		cluster, spool = "", fmt.Sprintf("gateway unix/%s\n\t\tgateway_token %s", c.sink, c.gwToken)
	case roleEdge:
		spool = "spool cluster {\n\t\t\tdeliver off\n\t\t\tfallback reject\n\t\t}"
	case roleDeliver:
		spool = fmt.Sprintf("gateway unix/%s\n\t\tgateway_token %s\n\t\tspool cluster {\n\t\t\tdeliver on\n\t\t\tfallback reject", c.sink, c.gwToken)
		if c.rate != "" {
			spool += "\n\t\t\trate " + c.rate
		}
		spool += "\n\t\t}"
	}
	var extra strings.Builder
	for _, block := range []string{cluster, spool} {
		if block != "" {
			extra.WriteString("\n\t\t" + block)
		}
	}
	return fmt.Sprintf(`{
	admin unix/%s
	auto_https off
	persist_config off
	servers {
		trusted_proxies static 127.0.0.0/8
		trusted_proxies_strict
	}
}

http://:%d {
	bind fd/3
	hooks {
		token %s
		auth_failures %d %s
		lockout %s%s
	}
}
`, c.admin, c.port, c.token, scaleLimit, scaleWindow, scaleWindow, extra.String())
}

// scaleNode is one running node.
type scaleNode struct {
	*ingress
	addr string // 127.0.0.1:port
	ln   net.Listener
}

// startScaleNodes starts n nodes with configs from cfg(i) in dir, all at
// once, and waits until every one answers on its admin endpoint and
// reports the cluster up.
func startScaleNodes(bin, dir string, n int, cfg func(i int, port int) scaleNodeConfig) ([]*scaleNode, error) {
	nodes := make([]*scaleNode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stopScaleNodes(nodes)
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		nodes[i] = &scaleNode{addr: ln.Addr().String(), ln: ln}
		c := cfg(i, port)
		ndir := filepath.Join(dir, fmt.Sprintf("node%d", i))
		if err := os.MkdirAll(ndir, 0o700); err != nil {
			stopScaleNodes(nodes)
			return nil, err
		}
		c.admin = filepath.Join(ndir, "admin.sock")
		path := filepath.Join(ndir, "Caddyfile")
		if err := os.WriteFile(path, []byte(c.caddyfile()), 0o600); err != nil {
			stopScaleNodes(nodes)
			return nil, err
		}
		f, err := ln.(*net.TCPListener).File()
		if err != nil {
			stopScaleNodes(nodes)
			return nil, err
		}
		wg.Go(func() {
			defer f.Close()
			in, err := startIngress(bin, path, c.admin, []*os.File{f})
			if err == nil && c.role != roleAlone {
				err = waitClusterUp(in)
			}
			nodes[i].ingress, errs[i] = in, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopScaleNodes(nodes)
		return nil, err
	}
	return nodes, nil
}

// waitClusterUp polls the node's metrics until caddy_hooks_cluster_up is 1.
func waitClusterUp(in *ingress) error {
	c := unixClient(in.admin, 2*time.Second)
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		if resp, err := c.Get("http://admin/metrics"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), "\ncaddy_hooks_cluster_up 1") {
				return nil
			}
		}
		select {
		case <-in.exited:
			return fmt.Errorf("caddy exited:\n%s", tail(in.logPath, 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("the cluster did not come up:\n%s", tail(in.logPath, 20))
}

// stopScaleNodes stops every started node and closes the listeners.
func stopScaleNodes(nodes []*scaleNode) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if n.ln != nil {
			n.ln.Close()
		}
		if n.ingress != nil {
			wg.Go(func() { ; n.stop() })
		}
	}
	wg.Wait()
}

// lockedHere reports whether the node lists addr among its lockouts.
func (n *scaleNode) lockedHere(addr string) bool {
	resp, err := unixClient(n.admin, 2*time.Second).Get("http://admin/hooks/lockouts")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"`+addr+`"`)
}

// natsProc is the NATS server: cmd/natsdev as a process of its own,
// monitoring on.
type natsProc struct {
	cmd     *exec.Cmd
	client  string // client URL
	monitor string // monitoring base URL
	exited  chan struct{}
}

// buildNatsdev builds ./cmd/natsdev into dir.
func buildNatsdev(dir string) (string, error) {
	bin := filepath.Join(dir, "natsdev")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/caddyhook/caddyhook/cmd/natsdev")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building cmd/natsdev: %w", err)
	}
	return bin, nil
}

// startNatsProc starts one JetStream server syncing lazily (NATS's
// default sync_interval) with its store in dir.
func startNatsProc(bin, dir string) (*natsProc, error) {
	ready := filepath.Join(dir, "nats.ready")
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-monitor", "127.0.0.1:0", "-store", filepath.Join(dir, "nats"),
		"-sync", "2m", "-name", "hookbench-scale", "-ready", ready)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &natsProc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	err = waitChild("natsdev", p.exited, logf.Name(), 30*time.Second, func() error {
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		var r struct{ Client, Monitor string }
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		p.client, p.monitor = r.Client, r.Monitor
		return nil
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// stop interrupts the server and waits for it.
func (p *natsProc) stop() { interrupt(p.cmd, p.exited) }

// connTraffic is what one client connection moved through NATS.
type connTraffic struct {
	inMsgs, outMsgs, inBytes, outBytes int64
}

// connz reads the traffic of the connections whose name starts with
// prefix, by connection id.
func (p *natsProc) connz(prefix string) (map[uint64]connTraffic, error) {
	resp, err := http.Get(p.monitor + "/connz?limit=4096")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var cz server.Connz
	if err := json.NewDecoder(resp.Body).Decode(&cz); err != nil {
		return nil, err
	}
	out := map[uint64]connTraffic{}
	for _, c := range cz.Conns {
		if strings.HasPrefix(c.Name, prefix) {
			out[c.Cid] = connTraffic{c.InMsgs, c.OutMsgs, c.InBytes, c.OutBytes}
		}
	}
	return out, nil
}

// trafficDelta sums after − before over the connections of after; it
// returns the totals and the number of connections.
func trafficDelta(before, after map[uint64]connTraffic) (connTraffic, int) {
	var t connTraffic
	for id, a := range after {
		b := before[id]
		t.inMsgs += a.inMsgs - b.inMsgs
		t.outMsgs += a.outMsgs - b.outMsgs
		t.inBytes += a.inBytes - b.inBytes
		t.outBytes += a.outBytes - b.outBytes
	}
	return t, len(after)
}
