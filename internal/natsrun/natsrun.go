// Package natsrun holds what the programs and tests that run NATS
// servers in-process (natstest, hookbench) share.
package natsrun

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WaitJetStream polls, through the comma-separated client urls, until the
// JetStream API answers (a cluster has elected its metadata leader), or
// fails after timeout.
func WaitJetStream(urls string, timeout time.Duration) error {
	nc, err := nats.Connect(urls, nats.Timeout(2*time.Second))
	if err != nil {
		return fmt.Errorf("nats connect: %w", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream not ready within %s: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
