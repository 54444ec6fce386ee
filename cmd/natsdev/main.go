// Command natsdev runs a real NATS server with JetStream for trying
// caddyhook's cluster mode locally (./dev cluster) and for the fault tests
// that need NATS as a process of its own (kill -9, SIGSTOP): the
// nats-server of the module's go.mod, in-process, so nothing needs
// installing.
//
//	natsdev [-listen 127.0.0.1:4222] [-store .cache/nats] [-sync always]
//	        [-name natsdev] [-cluster 127.0.0.1:0 -cluster-name hooks-dev
//	         -routes nats-route://…,… [-no-advertise]]
//	        [-monitor 127.0.0.1:0] [-user caddyhook] [-ready FILE]
//
// Port 0 picks a free port; -ready then tells which: once the server
// accepts connections it writes {"client":…,"route":…,"monitor":…} (the
// addresses in use) to FILE. -sync is JetStream's sync_interval: always
// (the default here: every write is on disk before it is acknowledged)
// or a duration (NATS's own default is 2m: a power loss can take what was
// acknowledged since the last sync).
//
// -user makes clients authenticate as that user with the password in
// $NATS_PASSWORD (never on the command line), as a production server
// should (./dev cluster does; caddyhook warns about a connection without
// credentials); without it anyone on the machine can connect.
//
// It is a development server: loopback only. Ctrl-C
// (or SIGTERM) stops it cleanly; JetStream's files stay in -store, so the
// queued events survive a restart.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// config are the command-line flags.
type config struct {
	listen, store, ready, name, sync string
	cluster, clusterName, routes     string
	noAdvertise                      bool
	monitor                          string
	user, password                   string // password: from $NATS_PASSWORD
}

func main() {
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:4222", "client address (loopback)")
	flag.StringVar(&c.store, "store", ".cache/nats", "JetStream store directory")
	flag.StringVar(&c.ready, "ready", "", "write the addresses in use (JSON) to this file once the server accepts connections")
	flag.StringVar(&c.name, "name", "natsdev", "server name (unique in a cluster)")
	flag.StringVar(&c.sync, "sync", "always", "JetStream sync_interval: always, or a duration such as 2m (NATS's default)")
	flag.StringVar(&c.cluster, "cluster", "", "cluster (route) address (loopback); empty: no cluster")
	flag.StringVar(&c.clusterName, "cluster-name", "hooks-dev", "cluster name")
	flag.StringVar(&c.routes, "routes", "", "comma-separated routes to the other servers (nats-route://host:port)")
	flag.BoolVar(&c.noAdvertise, "no-advertise", false, "do not tell clients the other servers' addresses (they use only the URLs they were given)")
	flag.StringVar(&c.monitor, "monitor", "", "HTTP monitoring address (loopback), e.g. 127.0.0.1:0; empty: none")
	flag.StringVar(&c.user, "user", "", "require clients to authenticate as this user, with the password in $NATS_PASSWORD")
	flag.Parse()
	c.password = os.Getenv("NATS_PASSWORD")
	if err := run(c); err != nil {
		log.Fatalf("natsdev: %v", err)
	}
}

// options turns the flags into the server's options.
func options(c config) (*server.Options, error) {
	host, port, err := loopback("-listen", c.listen)
	if err != nil {
		return nil, err
	}
	o := &server.Options{ServerName: c.name, Host: host, Port: port, JetStream: true, StoreDir: c.store, NoSigs: true, Logtime: true}
	if c.user != "" {
		if len(c.password) < 16 {
			return nil, fmt.Errorf("-user needs $NATS_PASSWORD, at least 16 characters (e.g. $(openssl rand -hex 16))")
		}
		o.Username, o.Password = c.user, c.password
	}
	switch s := strings.ToLower(c.sync); s {
	case "always":
		o.SyncAlways = true
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("-sync %q: want always or a positive duration", c.sync)
		}
		o.SyncInterval = d
	}
	if c.cluster != "" {
		h, p, err := loopback("-cluster", c.cluster)
		if err != nil {
			return nil, err
		}
		o.Cluster = server.ClusterOpts{Name: c.clusterName, Host: h, Port: p, NoAdvertise: c.noAdvertise}
		for r := range strings.SplitSeq(c.routes, ",") {
			if r = strings.TrimSpace(r); r == "" {
				continue
			}
			u, err := url.Parse(r)
			if err != nil || u.Scheme != "nats-route" || u.Host == "" {
				return nil, fmt.Errorf("-routes: %q is not a nats-route://host:port URL", r)
			}
			o.Routes = append(o.Routes, u)
		}
		if len(o.Routes) == 0 {
			return nil, fmt.Errorf("-cluster needs -routes (JetStream in a cluster needs at least one configured route)")
		}
	} else if c.routes != "" || c.noAdvertise {
		return nil, fmt.Errorf("-routes and -no-advertise need -cluster")
	}
	if c.monitor != "" {
		h, p, err := loopback("-monitor", c.monitor)
		if err != nil {
			return nil, err
		}
		o.HTTPHost, o.HTTPPort = h, p
	}
	return o, nil
}

// loopback splits a loopback host:port; port 0 becomes the server's
// "pick a free port" (it reads 0 as its default port).
func loopback(flagName, addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", flagName, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", 0, fmt.Errorf("%s: %s is not a loopback address (this is a development server)", flagName, host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s: port %q is not a port number", flagName, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

// Ready is what -ready writes: the addresses the server uses.
type Ready struct {
	Client  string `json:"client"`
	Route   string `json:"route,omitempty"`
	Monitor string `json:"monitor,omitempty"`
}

func run(c config) error {
	opts, err := options(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.store, 0o700); err != nil {
		return err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("server not ready on %s", c.listen)
	}
	if c.ready != "" {
		r := Ready{Client: s.ClientURL()}
		if a := s.ClusterAddr(); a != nil {
			r.Route = "nats-route://" + a.String()
		}
		if a := s.MonitorAddr(); a != nil {
			r.Monitor = "http://" + a.String()
		}
		b, _ := json.Marshal(r)
		// written whole, then renamed: a reader never sees half of it
		tmp := c.ready + ".tmp"
		if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
			s.Shutdown()
			return err
		}
		if err := os.Rename(tmp, c.ready); err != nil {
			s.Shutdown()
			return err
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}
