package caddyhook

import (
	"net/http"
	"testing"
	"time"
)

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
