package caddyhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// BenchmarkGatewaySend is one dispatch through the gateway client to a
// lean devgw on a Unix socket, from parallel callers as under load.
func BenchmarkGatewaySend(b *testing.B) {
	gw := startTestGateway(b, devgw.Config{Lean: true})
	addr, err := parseGatewayAddr("unix/" + gw.sock)
	if err != nil {
		b.Fatal(err)
	}
	c := newGatewayClient(addr, "/hooks", utGatewayToken, 10*time.Second, false)
	defer c.close()
	body := []byte(`{"text":"Deploy finished: build 1234 is green","mode":"now"}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g := gatewayRequest{kind: kindWake, body: body, idemKey: "6f1b1c39-5b0e-4c1a-9d55-2f3f0e1c6a7b"}
			rep, err := c.send(context.Background(), &g, "")
			if err != nil || rep.status != http.StatusOK {
				b.Errorf("send: %d, %v", rep.status, err)
				return
			}
		}
	})
}
