package caddyhook

import (
	"bufio"
	"bytes"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// rssBytes is the process's resident set (Linux), or -1.
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// TestEventLogRSSBound is the memory measurement: 1,000,000
// requests through the handler, half accepted wakes (sent to a gateway
// on a Unix socket), half wrong tokens from 500,000 addresses, with the
// event log's defaults: the process's RSS grows by no more than the
// log's bounds (max_bytes plus the rejection rows), twice over for Go's
// garbage collector (GOGC=100), plus 8 MiB. It takes minutes, so it runs
// only with CADDYHOOK_RSS_TEST=1 (the lockout table is kept small, so
// that its own bound does not hide the log's).
func TestEventLogRSSBound(t *testing.T) {
	if os.Getenv("CADDYHOOK_RSS_TEST") != "1" {
		t.Skip("set CADDYHOOK_RSS_TEST=1 to run the 1,000,000-request memory measurement")
	}
	gw := startTestGateway(t, devgw.Config{Lean: true})
	h := newTestHandler(t, gw, func(h *Handler) { h.LockoutTableSize = 1 << 16 })
	body := []byte(`{"text":"New deployment finished on prod-eu-1","mode":"now"}`)
	good, gb := benchRequest("/hooks/wake", body, "Authorization", "Bearer "+utHookToken, "Content-Type", "application/json")
	bad, bb := benchRequest("/hooks/wake", body, "Authorization", "Bearer not-the-token-not-the-token-not-the-token", "Content-Type", "application/json")
	w := &benchWriter{h: http.Header{}}
	var ra bytes.Buffer
	serve := func(i int) {
		r, rb, want := good, gb, http.StatusOK
		if i%2 == 1 {
			r, rb, want = bad, bb, http.StatusUnauthorized
			ra.Reset()
			ra.WriteString(netip.AddrFrom4([4]byte{10, byte(i >> 17), byte(i >> 9), byte(i >> 1)}).String())
			ra.WriteString(":40000")
			r.RemoteAddr = ra.String()
		}
		rb.Reset(body)
		w.reset()
		if err := h.ServeHTTP(w, r, passThrough); err != nil || w.status != want {
			t.Fatalf("request %d: %d %v", i, w.status, err)
		}
	}
	settle := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		return rssBytes()
	}
	for i := range 1_000 { // warm: pools, connections (the log then holds 500 events)
		serve(i)
	}
	before := settle()
	const n = 1_000_000
	for i := range n {
		serve(i)
	}
	after := settle()
	b := h.events.log.Bounds()
	page := h.events.log.List(eventlog.Filter{Limit: 1})
	bound := 2*(b.MaxBytes+int64(b.MaxRejections)*400) + 8<<20
	t.Logf("%d requests: RSS %.1f → %.1f MiB (+%.1f MiB); the log holds %d events in %.1f MiB and %d rejection rows; bound %.1f MiB",
		n, mib(before), mib(after), mib(after-before), page.Events, mib(page.Bytes), page.Rejections, mib(bound))
	if after-before > bound {
		t.Fatalf("RSS grew %.1f MiB, over the bound %.1f MiB", mib(after-before), mib(bound))
	}
}

func mib(v int64) float64 { return float64(v) / (1 << 20) }
