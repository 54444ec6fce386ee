package caddyhook

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// benchConns is the number of concurrent client connections of
// BenchmarkSpoolVsSync (issue #5 measures at 32).
const benchConns = 32

// BenchmarkSpoolVsSync compares sync and spool (durable accept) mode in
// one run: one Caddy in this process serves two sites (told apart by
// host, on one loopback port the kernel picks), one per mode, in
// front of the same lean devgw gateway on a Unix socket, and 32 client
// connections post agent requests over loopback HTTP. It reports req/s,
// p50 and p99 latency; compare spool with sync (target: spool ≥ 0.5×
// sync req/s, spool p99 < 25 ms). Run with
//
//	go test ./caddyhook -run '^$' -bench SpoolVsSync -benchmem -benchtime 20000x
func BenchmarkSpoolVsSync(b *testing.B) {
	dir, err := os.MkdirTemp("", "chbench") // short: Unix socket paths are limited
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "gw.sock")
	gw := devgw.New(devgw.Config{Token: itGatewayToken, Lean: true})
	ln, err := devgw.Listen("unix/" + sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := devgw.Server(gw)
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })

	site := func(host, extra string) string {
		return fmt.Sprintf(`http://%s:0 {
	bind 127.0.0.1
	hooks {
		token %s
		gateway unix/%s
		gateway_token %s
		%s
	}
}
`, host, itHookToken, sock, itGatewayToken, extra)
	}
	cf := `{
	admin off
	auto_https off
	persist_config off
	log {
		output discard
	}
}
` + site("sync.localhost", "") + site("spool.localhost", "spool "+filepath.Join(dir, "spool"))
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": filepath.Join(dir, "Caddyfile")})
	if err != nil {
		b.Fatal(err)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = caddy.Stop() })
	url := "http://" + firstListenAddr(b) + "/hooks/agent"

	var sent int
	for _, mode := range []string{"sync", "spool"} {
		b.Run(mode, func(b *testing.B) {
			runConcurrentPosts(b, url, mode+".localhost")
			// let spooled deliveries finish outside the timed region, so
			// the next run starts with an empty spool and an idle gateway
			sent += b.N
			testkit.WaitForState(b, func() string { return fmt.Sprintf("gateway received %d of %d events", gw.Count("agent"), sent) },
				func() bool { return gw.Count("agent") >= sent })
		})
	}
}

// runConcurrentPosts posts b.N agent requests to url (with the Host
// header host) over benchConns keep-alive connections, fails on any answer
// but 200, and reports throughput and latency percentiles.
func runConcurrentPosts(b *testing.B, url, host string) {
	tr := &http.Transport{MaxConnsPerHost: benchConns, MaxIdleConnsPerHost: benchConns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	body := `{"message":"Build 4711 failed on main: 3 tests red","name":"CI"}`
	var next atomic.Int64
	var (
		errMu    sync.Mutex
		firstErr error
	)
	lat := make([][]time.Duration, benchConns)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for c := range benchConns {
		wg.Go(func() {
			own := make([]time.Duration, 0, b.N/benchConns+1)
			for next.Add(1) <= int64(b.N) {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Host = host
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+itHookToken)
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				own = append(own, time.Since(t0))
				if err != nil {
					errMu.Lock()
					firstErr = cmp.Or(firstErr, err)
					errMu.Unlock()
					return
				}
			}
			lat[c] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(p*float64(len(all))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
