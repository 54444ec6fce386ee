package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/caddyhook/caddyhook/internal/natsrun"
	"github.com/caddyhook/caddyhook/internal/tcpproxy"
)

// natsReady bounds a server's start and a cluster's leader election.
const natsReady = 30 * time.Second

// natsServers are NATS JetStream servers in hookbench's process for the
// cluster rows: one alone, or a cluster of several on loopback, every
// port picked by the server (-1) and every store under dir.
type natsServers struct {
	servers []*server.Server
	seed    *tcpproxy.Proxy
}

// startNATS starts the k.servers servers of set k (more than one: a
// JetStream cluster whose seed route is a proxy hookbench holds,
// forwarding to the first server's cluster port; k.always: each syncs
// every write before acknowledging it) and waits until JetStream answers.
func startNATS(dir string, k natsKey) (*natsServers, error) {
	n := k.servers
	set := fmt.Sprint(n)
	if k.always {
		set += "always"
	}
	ns := &natsServers{}
	var routes []*url.URL
	if n > 1 {
		var err error
		if ns.seed, err = tcpproxy.New(""); err != nil {
			return nil, err
		}
		seed, _ := url.Parse("nats-route://" + ns.seed.Addr())
		routes = []*url.URL{seed}
	}
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("bench%s-%d", set, i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: filepath.Join(dir, fmt.Sprintf("nats%s-%d", set, i+1)), NoLog: true, NoSigs: true,
			SyncAlways: k.always}
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: "bench" + set, Host: "127.0.0.1", Port: -1}
			opts.Routes = routes
		}
		s, err := server.NewServer(opts)
		if err != nil {
			ns.stop()
			return nil, err
		}
		go s.Start()
		ns.servers = append(ns.servers, s)
		if !s.ReadyForConnections(natsReady) {
			ns.stop()
			return nil, fmt.Errorf("nats-server %s not ready", opts.ServerName)
		}
		if i == 0 && ns.seed != nil {
			ns.seed.SetTarget(s.ClusterAddr().String())
		}
	}
	if err := ns.waitJetStream(); err != nil {
		ns.stop()
		return nil, err
	}
	return ns, nil
}

// urls are the servers' client URLs, space-separated (a Caddyfile list).
func (ns *natsServers) urls() string {
	u := make([]string, 0, len(ns.servers))
	for _, s := range ns.servers {
		u = append(u, s.ClientURL())
	}
	return strings.Join(u, " ")
}

// waitJetStream waits until JetStream answers (a cluster has elected its
// metadata leader).
func (ns *natsServers) waitJetStream() error {
	return natsrun.WaitJetStream(strings.ReplaceAll(ns.urls(), " ", ","), natsReady)
}

// stop shuts every server down.
func (ns *natsServers) stop() {
	if ns == nil {
		return
	}
	for _, s := range ns.servers {
		s.Shutdown()
	}
	for _, s := range ns.servers {
		s.WaitForShutdown()
	}
	if ns.seed != nil {
		ns.seed.Close()
	}
}
