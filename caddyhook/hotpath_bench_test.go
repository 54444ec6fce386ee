package caddyhook

import (
	"context"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// These benchmarks split the sync hot path into the parts cmd/hookbench's
// profiles point at: the handler's own work (no gateway), the gateway
// client against a lean sink, payload decoding and the metrics.

// nopSink answers every delivery like a gateway would, without I/O.
type nopSink struct{}

func (nopSink) deliver(_ context.Context, items []prepared, _ int, _ netip.Addr) (int, []byte, *hookError) {
	return http.StatusOK, []byte(`{"ok":true,"mode":"now"}`), nil
}

// BenchmarkHandlerOwnWake is an accepted wake through ServeHTTP with the
// gateway replaced by nopSink: the handler's own cost per request.
func BenchmarkHandlerOwnWake(b *testing.B) {
	h := newTestHandler(b, nil, nil)
	h.sink = nopSink{}
	body := []byte(`{"text":"Deploy finished: build 1234 is green","mode":"now"}`)
	r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
}

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

// BenchmarkDecodePayload decodes the wake and agent bodies of hookbench.
func BenchmarkDecodePayload(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"wake", `{"text":"Deploy finished: build 1234 is green","mode":"now"}`},
		{"agent", `{"message":"Deploy finished: build 1234 is green. Summarise the changes for the team.",` +
			`"name":"CI","agentId":"ops","sessionKey":"hook:ci:main","model":"fast-model","deliver":false}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ex := exchange{body: []byte(bc.body)}
				if herr := decodePayload(&ex); herr != nil {
					b.Fatal(herr)
				}
			}
		})
	}
}

// BenchmarkObserveRequest counts one answered request.
func BenchmarkObserveRequest(b *testing.B) {
	h := newTestHandler(b, nil, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.metrics.observeRequest(routeWake, http.StatusOK)
			h.metrics.observeDispatch(kindWake, "ok", time.Millisecond)
		}
	})
}
