package caddyhook

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// BenchmarkEventLog measures the event log's cost side by side: an
// accepted wake and a wrong token from many addresses, with the log on
// (the default) and off (compare the pairs: go test -run '^$' -bench
// EventLog -count 6 ./caddyhook/ | benchstat).
func BenchmarkEventLog(b *testing.B) {
	gw := startTestGateway(b, devgw.Config{})
	body := []byte(`{"text":"New deployment finished on prod-eu-1","mode":"now"}`)
	addrs := make([]string, 1<<16)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String() + ":40000"
	}
	for _, on := range []bool{true, false} {
		name := "on"
		mod := func(h *Handler) {}
		if !on {
			name = "off"
			mod = func(h *Handler) { h.Events = &EventsConfig{Disabled: true} }
		}
		b.Run("wake/"+name, func(b *testing.B) {
			h := newTestHandler(b, gw, mod)
			r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
			runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
		})
		b.Run("unauthorized/"+name, func(b *testing.B) {
			h := newTestHandler(b, gw, mod)
			r, rb := benchRequest("/hooks/wake", body, "Authorization", "Bearer not-the-token-not-the-token-not-the-token", "Content-Type", "application/json")
			runHandlerBench(b, h, r, body, rb, http.StatusUnauthorized, func(i int, r *http.Request) {
				r.RemoteAddr = addrs[i%len(addrs)]
			})
		})
	}
}
