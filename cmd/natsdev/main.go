// Command natsdev runs a real NATS server with JetStream for trying
// caddyhook's cluster mode locally (./dev cluster): the nats-server of the
// module's go.mod, in-process, so nothing needs installing.
//
//	natsdev [-listen 127.0.0.1:4222] [-store .cache/nats] [-ready FILE] [-user caddyhook]
//
// Port 0 picks a free port; -ready then tells which.
// It is a development server, on loopback only, that requires a user name
// and password (-user, and the password in $NATS_PASSWORD, never on the
// command line), as a production server should: caddyhook warns about a
// connection without credentials. Ctrl-C (or SIGTERM) stops it cleanly;
// JetStream's files stay in -store, so the queued events survive a
// restart.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4222", "client address (loopback)")
	store := flag.String("store", ".cache/nats", "JetStream store directory")
	ready := flag.String("ready", "", "write the client URL to this file once the server accepts connections")
	user := flag.String("user", "caddyhook", "the user name clients authenticate with (the password is $NATS_PASSWORD)")
	flag.Parse()
	if err := run(*listen, *store, *ready, *user, os.Getenv("NATS_PASSWORD")); err != nil {
		log.Fatalf("natsdev: %v", err)
	}
}

func run(listen, store, ready, user, password string) error {
	if user == "" || len(password) < 16 {
		return fmt.Errorf("-user and $NATS_PASSWORD (at least 16 characters, e.g. $(openssl rand -hex 16)) are required")
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen: %s is not a loopback address (this is a development server)", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("-listen: port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as its default port, 4222
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return err
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "natsdev", Host: host, Port: port, JetStream: true, StoreDir: store, NoSigs: true,
		Username: user, Password: password,
	})
	if err != nil {
		return err
	}
	s.ConfigureLogger()
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("server not ready on %s", listen)
	}
	if ready != "" {
		if err := os.WriteFile(ready, []byte(s.ClientURL()+"\n"), 0o600); err != nil {
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
