// Command devgateway is a stand-in agent gateway for trying caddyhook: it
// listens on a Unix socket (or loopback TCP), speaks the gateway hooks
// protocol, prints each action it receives and appends the main-session
// events to a JSONL file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

func main() {
	listen := flag.String("listen", "unix//tmp/caddyhook-gateway.sock", "address: unix//path.sock or loopback host:port")
	prefix := flag.String("prefix", "/hooks", "hooks path prefix")
	events := flag.String("events", "devgateway-events.jsonl", "JSONL file the main-session events are appended to (empty: none)")
	quiet := flag.Bool("quiet", false, "do not print each action")
	flag.Parse()
	token := os.Getenv("GATEWAY_TOKEN")

	cfg := devgw.Config{Prefix: *prefix, Token: token, Log: os.Stdout}
	if *quiet {
		cfg.Log = nil
	}
	if *events != "" {
		f, err := devgw.OpenEvents(*events)
		if err != nil {
			log.Fatalf("devgateway: %v", err)
		}
		defer f.Close()
		cfg.Events = f
	}
	ln, err := devgw.Listen(*listen)
	if err != nil {
		log.Fatalf("devgateway: %v", err)
	}
	srv := devgw.Server(devgw.New(cfg))
	auth := "no auth"
	if token != "" {
		auth = "Bearer $GATEWAY_TOKEN required"
	}
	fmt.Printf("devgateway listening on %s (prefix %s, %s, events → %s)\n", *listen, *prefix, auth, *events)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("devgateway: %v", err)
	}
}
